#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The entry point shared by the fuzz targets.
///
/// Built by `.ci/fuzz` (`-sanitize=fuzzer -DPUSHFLEET_FUZZ`), a target's `main` hands its
/// `LLVMFuzzerTestOneInput` to libFuzzer's driver. SwiftPM links an executable's `main` to the
/// module's own entry point, so libFuzzer's `main` cannot be used; `LLVMFuzzerRunDriver` is the
/// documented way in. In a normal build the same binary replays the files or folders it is given,
/// once each: the corpus and past findings can be rerun without the sanitizer runtime.
public enum FuzzDriver {
    public typealias TestOneInput = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

    public static func main(_ testOneInput: TestOneInput) -> Never {
        #if PUSHFLEET_FUZZ
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
        exit(replay(Array(CommandLine.arguments.dropFirst()), testOneInput))
        #endif
    }

    /// Runs every file named, and every file in every folder named, through the target once.
    static func replay(_ paths: [String], _ testOneInput: TestOneInput) -> CInt {
        guard !paths.isEmpty else {
            let name = CommandLine.arguments.first ?? "fuzzer"
            FileHandle.standardError.write(
                Data("usage: \(name) FILE|FOLDER…\nBuilt without libFuzzer, this replays inputs; .ci/fuzz builds the fuzzer.\n".utf8)
            )
            return 2
        }
        var files: [String] = []
        for path in paths {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                FileHandle.standardError.write(Data("no such file: \(path)\n".utf8))
                return 2
            }
            if isFolder.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.sorted().map { (path as NSString).appendingPathComponent($0) }
            } else {
                files.append(path)
            }
        }
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            // Named first, so that a crash says which input it was.
            FileHandle.standardError.write(Data("Running: \(file)\n".utf8))
            _ = data.withUnsafeBytes { testOneInput($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
        }
        print("replayed \(files.count) inputs")
        return 0
    }
}

#if PUSHFLEET_FUZZ
/// libFuzzer's driver, in `libclang_rt.fuzzer`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ testOneInput: FuzzDriver.TestOneInput
) -> CInt
#endif
