/// A request with every value in place, ready for the wire.
public struct RenderedRequest: Sendable, Equatable {
    public var method: String
    /// Path and query, percent-encoded.
    public var target: String
    public var headers: [(name: String, value: String)]
    public var body: String?
    public var contentType: String?

    public static func == (a: RenderedRequest, b: RenderedRequest) -> Bool {
        a.method == b.method && a.target == b.target && a.body == b.body && a.contentType == b.contentType
            && a.headers.map { "\($0.name): \($0.value)" } == b.headers.map { "\($0.name): \($0.value)" }
    }
}

/// Why a request could not be rendered; `label` is a bounded error class.
public struct RenderError: Error, Sendable, Equatable, CustomStringConvertible {
    public var label: String
    public var description: String

    static func missing(_ name: String, in request: APIRequest) -> RenderError {
        RenderError(label: "unset_variable", description: "\(request.operation): {{\(name)}} has no value")
    }
}

extension APIRequest {
    /// Every variable the request's templates use.
    public var variables: [VariableRef] {
        var refs = path.variables.map(\.ref) + query.flatMap { $0.value.variables.map(\.ref) } + headers.flatMap { $0.value.variables.map(\.ref) }
        switch body {
        case .json(let template): refs += template.variables.map(\.ref)
        case .form(let items): refs += items.flatMap { $0.value.variables.map(\.ref) }
        case .text(let template, _): refs += template.variables.map(\.ref)
        case nil: break
        }
        return refs
    }

    /// Fills in every template. Path values are encoded as one segment, query and form values
    /// as one component each, so a value never changes the request's structure (`bob&x=1` stays
    /// one user name).
    public func render(_ values: some TemplateValues) -> Result<RenderedRequest, RenderError> {
        func missing(_ template: Template) -> RenderError {
            let name = template.variables.first { values.value(of: $0.ref) == nil }?.name ?? "?"
            return .missing(name, in: self)
        }
        guard var target = path.render(values, encode: PercentEncoding.component) else { return .failure(missing(path)) }
        if !query.isEmpty {
            var separator = target.contains("?") ? "&" : "?"
            for item in query {
                guard let value = item.value.render(values, encode: { $0 }) else { return .failure(missing(item.value)) }
                target += separator + PercentEncoding.component(item.name) + "=" + PercentEncoding.component(value)
                separator = "&"
            }
        }
        var rendered: [(name: String, value: String)] = []
        rendered.reserveCapacity(headers.count)
        for header in headers {
            guard let value = header.value.render(values) else { return .failure(missing(header.value)) }
            // A header value that ends the line would let a value add headers of its own.
            guard !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) else {
                return .failure(RenderError(label: "bad_header_value", description: "\(operation): header \(header.name) would contain a line break"))
            }
            // An empty value leaves the header out (a request that must not send a default one).
            if !value.isEmpty { rendered.append((header.name, value)) }
        }
        var text: String?
        switch body {
        case nil: break
        case .json(let template):
            guard let json = template.render(values) else {
                let name = template.variables.first { values.value(of: $0.ref) == nil }?.name ?? "?"
                return .failure(.missing(name, in: self))
            }
            text = json
        case .form(let items):
            var form = ""
            for item in items {
                guard let value = item.value.render(values) else { return .failure(missing(item.value)) }
                if !form.isEmpty { form += "&" }
                form += PercentEncoding.component(item.name) + "=" + PercentEncoding.component(value)
            }
            text = form
        case .text(let template, _):
            guard let value = template.render(values) else { return .failure(missing(template)) }
            text = value
        }
        return .success(RenderedRequest(method: method, target: target, headers: rendered, body: text, contentType: body?.contentType))
    }
}

/// What an answer gave: the values of a request's extractions, read by ``extract(status:headers:body:)``.
public struct ExtractedValues: Sendable, Equatable {
    public var values: [(ref: VariableRef, value: APIValue)]
    /// The name of a required value the answer did not have.
    public var missing: String?

    public init(values: [(ref: VariableRef, value: APIValue)] = [], missing: String? = nil) {
        self.values = values
        self.missing = missing
    }

    public static func == (a: ExtractedValues, b: ExtractedValues) -> Bool {
        a.missing == b.missing && a.values.map(\.ref) == b.values.map(\.ref) && a.values.map(\.value) == b.values.map(\.value)
    }
}

extension APIRequest {
    /// Reads the request's extractions from an answer.
    public func extract(headers: [(name: String, value: String)], body: some Collection<UInt8>) -> ExtractedValues {
        var result = ExtractedValues(values: [], missing: nil)
        guard !extract.isEmpty else { return result }
        // One copy of the answer for every extraction, not one per JSON source.
        let body = Array(body)
        for extraction in extract {
            if let value = extraction.sources.lazy.compactMap({ ValueReader.read($0, headers: headers, body: body) }).first {
                result.values.append((extraction.variable, value))
            } else if !extraction.optional {
                result.missing = result.missing ?? extraction.name
            }
        }
        return result
    }
}

/// Reads a ``ValueLocation`` from headers and a body.
public enum ValueReader {
    public static func read(_ location: ValueLocation, headers: [(name: String, value: String)], body: some Collection<UInt8>) -> APIValue? {
        switch location {
        case .json(let pointer): return pointer.value(in: body)
        case .header(let name):
            let lower = name.lowercased()
            return headers.first { $0.name.lowercased() == lower }.map { .text($0.value) }
        case .cookie(let name):
            // The last Set-Cookie for the name wins, as in a browser; the value ends at the first ';'.
            let set = headers.last { header in
                header.name.lowercased() == "set-cookie" && header.value.drop { $0 == " " }.hasPrefix(name + "=")
            }?.value.drop { $0 == " " }.dropFirst(name.count + 1).prefix { $0 != ";" }
            guard let found = set else { return nil }
            var value = String(found.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            // An emptied cookie is how a server deletes it: nothing to keep.
            return value.isEmpty ? nil : .text(value)
        case .body:
            return body.isEmpty ? nil : .text(String(decoding: body, as: UTF8.self))
        }
    }
}
