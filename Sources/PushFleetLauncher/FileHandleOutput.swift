import Foundation

/// A line to standard output or standard error, written at once: the commands' and the benches'
/// tables and messages, unbuffered so that they interleave with child processes' output in order.
public enum FileHandleOutput {
    public static func standardError(_ text: String) {
        FileHandle.standardError.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }

    public static func standardOutput(_ text: String) {
        FileHandle.standardOutput.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }
}
