import Foundation
import FuzzDriver
import HTTPTypes
import PushFleetBackend
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// The parsers that take text from outside, straight: thousands of inputs a second where the
/// servers' and the loader's targets reach them through HTTP or YAML. The first byte picks one
/// (`'0'`…`'9'`); the rest is its input. Besides a crash, a finding is a value accepted out of
/// the range its parser promises.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzParsers(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Data(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch Int(data[0] &- 0x30) % 10 {
    case 0: faultSettings(bytes)
    case 1: duration(text)
    case 2:
        if let rate = try? Rate(parsing: text) {
            check(rate.perSecond.isFinite && rate.perSecond >= 0, "rate \(rate.perSecond) from '\(text)'")
        }
    case 3:
        if let threshold = try? Threshold(metric: "delivery.latency", expression: text) {
            check(threshold.bound.isFinite, "threshold bound \(threshold.bound) from '\(text)'")
            if case .percentile(let p) = threshold.aggregate { check(p > 0 && p <= 100, "percentile \(p) from '\(text)'") }
        }
    case 4:
        if let address = try? ListenAddress(parsing: text) {
            check((0...65535).contains(address.port) && !address.host.isEmpty, "address \(address) from '\(text)'")
        }
    case 5: _ = StoreLocation.parse(text)
    case 6:
        if let users = try? UserDirectory(fileContents: text) { _ = users.verify(user: "user", password: "user") }
    case 7: durationRoundTrip(text)
    case 8:
        bytes.withUnsafeBytes { raw in
            http1Head(raw)
            http1HeadsInTurn(raw)
        }
    default: plainJSONString(bytes)
    }
    return 0
}

/// `PUT /admin/faults`: settings without problems draw latencies within 0…1 h, whatever the draw.
func faultSettings(_ json: Data) {
    guard let settings = try? JSONDecoder().decode(FaultSettings.self, from: json), settings.problems().isEmpty else { return }
    for ratio in [settings.drop, settings.throttle, settings.unregisteredRatio] { check((0...1).contains(ratio), "ratio \(ratio)") }
    guard let latency = settings.latency else { return }
    for unit in [0, 1e-300, 0.5, 0.999_999_999, 1.0.nextDown] {
        let delay = latency.draw { unit }
        check(delay >= .zero && delay <= .milliseconds(LatencyDistribution.maximumMs), "latency \(delay) from \(latency)")
    }
}

/// The push port's HTTP/1.1 head reader: a head it reads lies within the bytes, ends with the
/// empty line, and names an origin-form path and a body length in range.
func http1Head(_ bytes: UnsafeRawBufferPointer) {
    guard case .request(let head) = HTTP1RequestScan.scan(bytes) else { return }
    check(head.length >= 18 && head.length <= min(bytes.count, HTTP1RequestScan.maxHeadLength), "head length \(head.length) of \(bytes.count)")
    check(bytes[head.length - 4] == 0x0D && bytes[head.length - 1] == 0x0A, "head does not end with its empty line")
    check((0..<1_000_000_000).contains(head.contentLength), "content length \(head.contentLength)")
    check(head.request.path?.first == "/", "path \(String(describing: head.request.path))")
}

/// A connection's heads read in turn with its line memo read as they read alone: the input
/// after the input, the input after its tail and the tail after the input (the tail cut where
/// the first byte says), each twice.
func http1HeadsInTurn(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count > 1 else { return }
    let tail = UnsafeRawBufferPointer(rebasing: bytes[(1 + Int(bytes[0]) % (bytes.count - 1))...])
    for (first, second) in [(bytes, bytes), (tail, bytes), (bytes, tail)] {
        var memo = HTTP1RequestScan.LineMemo()
        _ = HTTP1RequestScan.scan(first, memo: &memo)
        let alone = HTTP1RequestScan.scan(second).description
        for _ in 0..<2 {
            let remembered = HTTP1RequestScan.scan(second, memo: &memo).description
            check(remembered == alone, "with the memo '\(remembered)', alone '\(alone)'")
        }
    }
}

/// A secure send's body read from its bytes: whenever it answers, JSONDecoder gives the same.
func plainJSONString(_ bytes: Data) {
    guard let fast = bytes.withUnsafeBytes(PlainJSONString.read) else { return }
    let decoded = try? JSONDecoder().decode(String.self, from: bytes)
    check(decoded == fast, "read '\(fast)', JSONDecoder \(String(describing: decoded))")
}

func duration(_ text: String) {
    guard let value = try? DurationText.parse(text) else { return }
    check(value >= .zero && value.nanoseconds < .max, "duration \(value) from '\(text)'")
}

/// What `DurationText.format` writes (in reports and messages) parses back to within its three
/// significant digits.
func durationRoundTrip(_ text: String) {
    guard let value = try? DurationText.parse(text) else { return }
    let written = DurationText.format(value)
    guard let back = try? DurationText.parse(written) else {
        check(false, "'\(written)', written for \(value), does not parse")
        return
    }
    let (a, b) = (Double(value.nanoseconds), Double(back.nanoseconds))
    check(abs(a - b) <= max(1, a * 0.005), "\(value) written as '\(written)' reads back as \(back)")
}

func check(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fatalError("out of range: \(what())") }
}

@main
enum FuzzParsers {
    static func main() {
        FuzzDriver.main(fuzzParsers)
    }
}
