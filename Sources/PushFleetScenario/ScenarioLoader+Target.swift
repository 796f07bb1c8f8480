import PushFleetCore
import Foundation
import Yams

extension ScenarioLoader {
    static func readTarget(_ node: Node, _ r: NodeReader) -> Scenario.Target? {
        if let text = node.string {
            guard text == "embedded" else {
                r.report(node, "target", "'\(text)' is not a target; use 'embedded' or {backend: URL, pns: URL | embedded}")
                return nil
            }
            return .embedded
        }
        guard let map = r.mapping(node, "target", allowed: ["backend", "pns", "pns_listen"]) else { return nil }
        guard let backendNode = map["backend"], let backend = r.string(backendNode, "target.backend") else {
            r.report(node, "target.backend", "required key is missing")
            return nil
        }
        guard isHTTPURL(backend) else {
            r.report(backendNode, "target.backend", "expected an http(s) URL, got '\(backend)'")
            return nil
        }
        let pns = map["pns"].flatMap { r.string($0, "target.pns") } ?? "embedded"
        if pns == "embedded" {
            let listen = map["pns_listen"].flatMap { r.string($0, "target.pns_listen") } ?? "127.0.0.1:0"
            return .external(backend: backend, pushService: .embedded(listen: listen))
        }
        guard isHTTPURL(pns) else {
            r.report(map["pns"], "target.pns", "expected an http(s) URL or 'embedded', got '\(pns)'")
            return nil
        }
        return .external(backend: backend, pushService: .url(pns))
    }

    static func isHTTPURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            return false
        }
        return true
    }

    /// `embedded:`: how the embedded backend and push service run.
    static func readEmbedded(_ node: Node, _ r: NodeReader, into options: inout Scenario.EmbeddedOptions) {
        guard let embedded = r.mapping(node, "embedded", allowed: ["registration_ttl", "store", "hub", "tls"]) else { return }
        if let tls = embedded["tls"] { options.tls = readTLS(tls, r) }
        if let ttl = embedded["registration_ttl"], let value = r.duration(ttl, "embedded.registration_ttl") {
            if Scenario.EmbeddedOptions.lifetimeRange.contains(value) {
                options.registrationTTL = value
            } else {
                r.report(ttl, "embedded.registration_ttl", "must be between 1s and 3650d")
            }
        }
        if let storeNode = embedded["store"], let text = r.string(storeNode, "embedded.store") {
            // `sqlite` alone: a fresh temporary file for the run.
            switch text == "sqlite" ? .success(.sqlite(path: "")) : StoreLocation.parse(text) {
            case .success(let store): options.store = store
            case .failure(let error): r.report(storeNode, "embedded.store", error.message)
            }
        }
        if let hubNode = embedded["hub"], let value = r.bool(hubNode, "embedded.hub") {
            options.hub = value
        }
    }

    /// `tls: on`, or `{listen: HOST:PORT, names: [..], ca_file: PATH}`.
    private static func readTLS(_ node: Node, _ r: NodeReader) -> Scenario.EmbeddedOptions.TLS? {
        var tls = Scenario.EmbeddedOptions.TLS()
        if case .scalar = node {
            guard let on = r.bool(node, "embedded.tls") else { return nil }
            return on ? tls : nil
        }
        guard let map = r.mapping(node, "embedded.tls", allowed: ["listen", "names", "ca_file"]) else { return nil }
        if let listen = map["listen"], let text = r.string(listen, "embedded.tls.listen") {
            let parts = text.split(separator: ":")
            if parts.count < 2 || Int(parts.last ?? "").map({ !(0...65535).contains($0) }) ?? true {
                r.report(listen, "embedded.tls.listen", "expected HOST:PORT (port 0 for any free port), got '\(text)'")
            }
            tls.listen = text
        }
        if let names = map["names"], let items = r.sequence(names, "embedded.tls.names", "host names") {
            tls.names = items.enumerated().compactMap { r.string($1, "embedded.tls.names[\($0)]") }
            let problems = TLSNames.problems(tls.names)
            if !problems.isEmpty { r.report(names, "embedded.tls.names", problems.joined(separator: "; ")) }
        }
        if let file = map["ca_file"] { tls.caFile = r.string(file, "embedded.tls.ca_file") }
        return tls
    }
}
