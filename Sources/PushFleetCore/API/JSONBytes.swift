/// JSON text written straight as UTF-8 bytes. The servers write one frame and one report per
/// push: building them as `String`s made a heap string of every literal joined to a 19-digit
/// instant, and grew the text through `String`'s generic append.
public struct JSONBytes: Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Text written as it is (member names, punctuation, literals).
    @inlinable
    public mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A JSON string: quoted and escaped as ``JSONText/quoted(_:)`` writes it.
    public mutating func quoted(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { JSONText.appendEscaped($0, to: &bytes) }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func integer(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        digits(value.magnitude)
    }

    public mutating func integer(_ value: Int) {
        integer(Int64(value))
    }

    public mutating func integer(_ value: UInt64) {
        digits(value)
    }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// `value`'s decimal digits, written least significant first and then turned around.
    private mutating func digits(_ value: UInt64) {
        let start = bytes.count
        var rest = value
        repeat {
            bytes.append(UInt8(truncatingIfNeeded: rest % 10) &+ UInt8(ascii: "0"))
            rest /= 10
        } while rest > 0
        // Swapped in place: reversing `bytes[start...]` copied the slice out, one allocation
        // for every number written.
        var low = start
        var high = bytes.count - 1
        while low < high {
            bytes.swapAt(low, high)
            low += 1
            high -= 1
        }
    }

    /// The bytes as a `String` (they are valid UTF-8: every string written in was).
    public var text: String { String(decoding: bytes, as: UTF8.self) }
}
