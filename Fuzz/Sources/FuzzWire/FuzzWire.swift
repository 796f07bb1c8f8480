import Foundation
import FuzzDriver
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOWebSocket
import PushFleetClients
import PushFleetCore
import PushFleetWire

/// The fleet's hand-written readers of what a backend under test sends, each against a reference
/// where one exists. The first byte picks one (`'0'`…`'7'`); for the two stream readers the
/// second byte says where the rest is cut into two reads. Besides a crash, a finding is an
/// answer the reference reads otherwise.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let input = UnsafeBufferPointer(start: data, count: size)
    let rest = Array(input.dropFirst())
    switch Int(input[0] &- UInt8(ascii: "0")) % 8 {
    case 0: httpAnswer(rest)
    case 1: webSocketFrames(rest)
    case 2: gatewayFrame(rest)
    case 3: jsonObject(rest)
    case 4: base64url(rest)
    case 5: jsonPointer(rest)
    case 6: strictXML(rest)
    default: eventTape(rest)
    }
    return 0
}

/// `bytes` less its first, cut in two where the first says.
func reads(_ bytes: [UInt8]) -> [ByteBuffer] {
    guard let first = bytes.first else { return [] }
    let body = bytes.dropFirst()
    let cut = body.startIndex + Int(first) % (body.count + 1)
    return [ByteBuffer(bytes: body[..<cut]), ByteBuffer(bytes: body[cut...])]
}

// MARK: HTTP/1.1 answers

/// The first final answer of a connection that ends after `bytes`, as the pool's reader and as
/// NIO's decoder (llhttp) read it. The reader is stricter than llhttp on purpose (folded fields,
/// disagreeing lengths), so only answers both read are compared: same status, same body.
func httpAnswer(_ bytes: [UInt8]) {
    let pieces = reads(bytes)
    let given = pieces.reduce(0) { $0 + $1.readableBytes }
    var parser = HTTP1ResponseParser(maxBody: 1 << 20)
    var ours: HTTP1Response?
    do {
        for var piece in pieces where ours == nil { ours = try parser.feed(&piece) }
        if ours == nil { ours = try parser.end() }
    } catch {
        ours = nil
    }
    guard let ours else { return }
    check((100...999).contains(ours.status), "status \(ours.status)")
    check(ours.body.readableBytes <= given, "body of \(ours.body.readableBytes) bytes from \(given)")
    guard let theirs = nioAnswer(pieces) else { return }
    check(
        ours.status == theirs.status && Array(ours.body.readableBytesView) == theirs.body,
        "reader: \(ours.status), \(ours.body.readableBytes) bytes; NIO: \(theirs.status), \(theirs.body.count) bytes"
    )
}

/// NIO's first whole final answer to one GET, the connection closed after `pieces`; nil if none.
func nioAnswer(_ pieces: [ByteBuffer]) -> (status: Int, body: [UInt8])? {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish() }
    do {
        try channel.pipeline.syncOperations.addHTTPClientHandlers()
        try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
        try channel.writeOutbound(HTTPClientRequestPart.end(nil))
    } catch {
        return nil
    }
    // An error after the first answer leaves that answer read; the parts stay queued.
    for piece in pieces { _ = try? channel.writeInbound(piece) }
    channel.pipeline.fireChannelInactive()
    var current: (status: Int, body: [UInt8])?
    while let part = try? channel.readInbound(as: HTTPClientResponsePart.self) {
        switch part {
        case .head(let head):
            current = head.status.code >= 200 ? (Int(head.status.code), []) : nil
        case .body(let body):
            current?.body += Array(body.readableBytesView)
        case .end:
            if let current { return current }
        }
    }
    return nil
}

// MARK: WebSocket frames

/// The frames the device socket's reader takes from the bytes, before it needs more or refuses,
/// are the first frames NIO's decoder reads from them, and no payload is longer than the input.
func webSocketFrames(_ bytes: [UInt8]) {
    let maxPayload = 1 << 14
    let pieces = reads(bytes)
    var reader = WebSocketFrameReader(maxPayload: maxPayload)
    var ours: [WebSocketFrameReader.Frame] = []
    reading: for piece in pieces {
        reader.append(piece)
        while true {
            switch reader.next() {
            case .frame(let frame):
                check(frame.payload.readableBytes <= bytes.count, "payload of \(frame.payload.readableBytes) bytes from \(bytes.count)")
                ours.append(frame)
            case .needMore: continue reading
            case .violation: break reading
            }
        }
    }
    guard !ours.isEmpty else { return }
    let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxPayload)))
    defer { _ = try? channel.finish() }
    for piece in pieces { _ = try? channel.writeInbound(piece) }
    for (index, frame) in ours.enumerated() {
        guard let theirs = try? channel.readInbound(as: WebSocketFrame.self) else {
            check(false, "frame \(index) (\(frame.opcode), \(frame.payload.readableBytes) bytes) that NIO does not read")
            return
        }
        check(
            theirs.fin == frame.fin && theirs.opcode == frame.opcode && theirs.unmaskedData == frame.payload,
            "frame \(index): reader \(frame.opcode) fin \(frame.fin) \(frame.payload.readableBytes) bytes; NIO \(theirs.opcode) fin \(theirs.fin) \(theirs.unmaskedData.readableBytes) bytes"
        )
    }
}

// MARK: JSON

/// A gateway frame (a push, a notice, a multiplexed command) the one-pass readers read is the
/// one `JSONDecoder` decodes: their documented promise.
func gatewayFrame(_ bytes: [UInt8]) {
    agrees(bytes) { PushFrame(fastJSON: $0) }
    agrees(bytes) { GatewayNotice(fastJSON: $0) }
    agrees(bytes) { GatewayCommand(fastJSON: $0) }
}

func agrees<T: Decodable & Equatable>(_ bytes: [UInt8], _ read: (UnsafeBufferPointer<UInt8>) -> T?) {
    guard let fast = bytes.withUnsafeBufferPointer(read) else { return }
    let decoded = try? JSONDecoder().decode(T.self, from: Data(bytes))
    check(decoded == fast, "fast reader: \(fast); JSONDecoder: \(decoded.map { "\($0)" } ?? "refused")")
}

/// Bytes the strict reader calls an object, `JSONSerialization` parses as a dictionary.
func jsonObject(_ bytes: [UInt8]) {
    guard bytes.withUnsafeBufferPointer({ StrictJSONReader.isObject($0) }) == true else { return }
    let parsed = try? JSONSerialization.jsonObject(with: Data(bytes))
    check(parsed is [String: Any], "'\(String(decoding: bytes, as: UTF8.self))' is no object to JSONSerialization")
}

// MARK: base64url

/// Decoding refuses all but the one spelling of a value, so what it decodes encodes back to the
/// same text, and Foundation's base64 reads the same bytes from it; any bytes encode and decode back.
func base64url(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let decoded = Base64URL.decode(text) {
        check(Base64URL.encode(decoded) == text, "'\(text)' decodes to bytes that encode as '\(Base64URL.encode(decoded))'")
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        check(Data(base64Encoded: standard) == decoded, "'\(text)' decodes otherwise than Foundation's base64")
    }
    let encoded = Base64URL.encode(Data(bytes))
    check(Base64URL.decode(encoded) == Data(bytes), "\(bytes.count) bytes encode as '\(encoded)', which does not decode back")
}

func check(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fatalError("disagreement: \(what())") }
}

@main
enum FuzzWire {
    static func main() {
        FuzzDriver.main(fuzzWire)
    }
}
