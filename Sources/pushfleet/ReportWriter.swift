import ArgumentParser
import Foundation
import PushFleetLauncher
import PushFleetReport
import PushFleetResults

/// Writes the rendered report files into a folder.
enum ReportWriter {
    struct WriteError: Error, CustomStringConvertible {
        var description: String
    }

    /// Makes an empty report folder and checks that files can be written in it. An existing
    /// file, or a folder that already holds anything, is refused rather than overwritten.
    static func prepare(_ directory: String) throws(WriteError) {
        let manager = FileManager.default
        var isFolder: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw WriteError(description: "--out \(directory): a file is in the way; give a folder that does not exist yet") }
            let entries = (try? manager.contentsOfDirectory(atPath: directory)) ?? []
            guard entries.isEmpty else {
                throw WriteError(description: "--out \(directory): the folder exists and is not empty; give a new folder (reports are never overwritten)")
            }
        }
        do {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw WriteError(description: "--out \(directory): cannot create the folder (\(error.localizedDescription))")
        }
        let probe = (directory as NSString).appendingPathComponent(".pushfleet-write-check")
        guard manager.createFile(atPath: probe, contents: Data()) else {
            throw WriteError(description: "--out \(directory): cannot write into the folder")
        }
        try? manager.removeItem(atPath: probe)
    }

    /// ``prepare(_:)``, saying why not and ending with the invalid-input code.
    static func prepareOrRefuse(_ directory: String) throws {
        do { try prepare(directory) } catch {
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
    }

    static func write(_ result: RunResult, to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for file in ReportFiles.files(result) {
            try write(file, to: (directory as NSString).appendingPathComponent(file.name))
        }
    }

    /// Piece by piece: a large file is never whole in memory.
    static func write(_ file: ReportFile, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw WriteError(description: "cannot write \(path)")
        }
        defer { try? handle.close() }
        do {
            try file.write { try handle.write(contentsOf: $0) }
        } catch let error as WriteError {
            throw error
        } catch {
            throw WriteError(description: "cannot write \(path) (\(error))")
        }
    }
}
