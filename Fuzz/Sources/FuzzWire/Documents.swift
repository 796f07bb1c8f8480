import Foundation
import PushFleetCore
import PushFleetHub
import PushFleetMetrics

#if canImport(FoundationXML)
import FoundationXML
#endif

// MARK: JSON Pointer

/// The pointer is the text before the first line feed, the document the bytes after it. Where
/// `JSONSerialization` reads the document, the scanner follows the pointer through Foundation's
/// own writing of it (keys made unique, strings escaped its way) to what Foundation's tree holds
/// there, by RFC 6901's rules; on any document it neither crashes nor reads past the end.
func jsonPointer(_ bytes: [UInt8]) {
    let cut = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
    let text = String(decoding: bytes[..<cut], as: UTF8.self)
    guard let pointer = try? JSONPointer(text) else { return }
    let document = Array(bytes[cut...].dropFirst())
    _ = pointer.value(in: document)
    guard let tree = try? JSONSerialization.jsonObject(with: Data(document), options: .fragmentsAllowed),
        let written = try? JSONSerialization.data(withJSONObject: tree, options: .fragmentsAllowed)
    else { return }
    let ours = pointer.value(in: written)
    let theirs = resolve(pointer.tokens, in: tree)
    switch (ours, theirs) {
    case (nil, nil):
        break
    case (.text(let found)?, let expected as String):
        check(found == expected, "'\(text)' in \(String(decoding: written, as: UTF8.self)): '\(found)', Foundation '\(expected)'")
    case (.json(let source)?, let expected?) where !(expected is String):
        let read = try? JSONSerialization.jsonObject(with: Data(source.utf8), options: .fragmentsAllowed)
        check(
            read.map { same($0, expected) } == true,
            "'\(text)' in \(String(decoding: written, as: UTF8.self)): \(source), Foundation \(expected)"
        )
    default:
        check(false, "'\(text)' in \(String(decoding: written, as: UTF8.self)): \(String(describing: ours)), Foundation \(String(describing: theirs))")
    }
}

/// RFC 6901 §4 over Foundation's tree: a member by its exact name, an element by an index of
/// decimal digits without a leading zero.
func resolve(_ tokens: [[UInt8]], in tree: Any) -> Any? {
    var here = tree
    for token in tokens {
        if let object = here as? [String: Any] {
            guard let name = String(validating: token, as: UTF8.self), let next = object[name] else { return nil }
            here = next
        } else if let array = here as? [Any] {
            guard !token.isEmpty, token.allSatisfy({ (0x30...0x39).contains($0) }), token.count == 1 || token.first != 0x30,
                let index = Int(String(decoding: token, as: UTF8.self)), index < array.count
            else { return nil }
            here = array[index]
        } else {
            return nil
        }
    }
    return here
}

func same(_ a: Any, _ b: Any) -> Bool {
    switch (a, b) {
    case (let a as [String: Any], let b as [String: Any]):
        return a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
    case (let a as [Any], let b as [Any]):
        return a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    case (let a as NSObject, let b as NSObject):
        return a.isEqual(b)
    default:
        return false
    }
}

// MARK: XML

/// What the strict checker accepts, libxml2 (Foundation's `XMLParser`, which recovers from much
/// more) parses too; and the UTF-8 document the checker hands on is accepted again, unchanged.
func strictXML(_ bytes: [UInt8]) {
    guard let document = try? StrictXML.utf8Document(Data(bytes)) else { return }
    let again = try? StrictXML.utf8Document(document)
    check(again == document, "the checked document of \(bytes) is not accepted as it is: \(String(decoding: document, as: UTF8.self))")
    let parser = XMLParser(data: document)
    check(parser.parse(), "libxml2 refuses what the strict checker accepts: \(String(decoding: document, as: UTF8.self)) (\(String(describing: parser.parserError)))")
}

// MARK: Event tapes

/// A tape from a damaged or foreign file is an error, never a crash: every event read names a
/// device of the plan, and no more events come out than there are bytes.
func eventTape(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    // Half the inputs start past the header's magic, so the fuzzer spends its time inside.
    let tape = (first & 1 == 1 ? EventTape.magic + [EventTape.version] : []) + bytes.dropFirst()
    let tokens = ["t0", "t1", "t2", "t3"]
    guard var reader = try? EventTapeReader(bytes: tape, tokens: tokens, users: 4, shift: { _ in 0 }) else { return }
    var events = 0
    while let event = try? reader.next() {
        events += 1
        check(events <= tape.count, "more events than bytes in a tape of \(tape.count)")
        switch event {
        case .deviceReady(let device, _), .deviceFailed(let device, _), .eligibility(let device, _, _, _):
            check(tokens.indices.contains(device), "device \(device) of \(tokens.count)")
        default:
            break
        }
    }
}
