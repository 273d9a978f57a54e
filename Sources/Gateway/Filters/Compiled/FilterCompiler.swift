import Foundation

/// Builds a filter's module into native code for `engine: compiled`:
/// `wasm2c` (Debian's wabt 1.0.32) translates it to C, and `cc` compiles
/// that with wabt's runtime (memory bounds-checked, no signal handlers) and
/// the glue (`CompiledGlue`) into a shared object, kept in the cache
/// directory by the module's hash so that a restart or a reload of the
/// same module does not build it again.
enum FilterCompiler {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Bumped when the glue changes, so objects built with an older one are not used.
    private static let glueVersion = 3

    /// The shared object for `bytes`, built if it is not in the cache.
    static func library(for bytes: [UInt8], environment: [String: String] = ProcessInfo.processInfo.environment) throws(Failure) -> String {
        let directory = cacheDirectory(environment)
        let key = "\(hash(bytes, seed: 0xcbf2_9ce4_8422_2325))\(hash(bytes, seed: 0x8422_2325_cbf2_9ce4))-\(bytes.count)-g\(glueVersion)"
        let library = "\(directory)/\(key).so"
        let files = FileManager.default
        do {
            try files.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "cannot create the cache directory \(directory): \(error.localizedDescription)")
        }
        // Code is loaded from it: another user must not be able to put any there, nor swap it (through its parent).
        for (path, owners) in [(directory, [geteuid()]), ((directory as NSString).deletingLastPathComponent, [geteuid(), 0])] {
            var status = stat()
            let found = path == directory ? lstat(path, &status) : stat(path, &status)
            guard found == 0, owners.contains(status.st_uid), status.st_mode & 0o022 == 0, status.st_mode & S_IFMT == S_IFDIR else {
                throw Failure(description: "the cache directory \(path) is not gatewayd's own (owned by its user, writable by no one else)")
            }
        }
        if files.fileExists(atPath: library) { return library }
        guard let runtime = runtimeDirectory(environment) else {
            throw Failure(description: "wabt's wasm2c runtime (wasm-rt-impl.c) is not installed: install Debian's wabt package")
        }
        let work = "\(directory)/\(key).build-\(getpid())-\(UInt32.random(in: .min ... .max))"
        do {
            try files.createDirectory(atPath: work, withIntermediateDirectories: false)
        } catch {
            throw Failure(description: "cannot create \(work): \(error.localizedDescription)")
        }
        defer { try? files.removeItem(atPath: work) }
        guard files.createFile(atPath: "\(work)/module.wasm", contents: Data(bytes)) else { throw Failure(description: "cannot write into \(work)") }
        try run("wasm2c", ["module.wasm", "-n", "gwm", "-o", "module.c"], in: work)
        let glue: CompiledGlue
        do {
            let header = try String(contentsOfFile: "\(work)/module.h", encoding: .utf8)
            glue = try CompiledGlue(header: header, prefix: "gwm")
        } catch let failure as CompiledGlue.Unsupported {
            throw Failure(description: "cannot be compiled: \(failure)")
        } catch {
            throw Failure(description: "wasm2c wrote no header: \(error.localizedDescription)")
        }
        guard files.createFile(atPath: "\(work)/glue.c", contents: Data(glue.source.utf8)) else { throw Failure(description: "cannot write into \(work)") }
        try RuntimePatch.apply(module: "\(work)/module.c")
        try run(environment["CC"] ?? "cc", ["-O2", "-fPIC", "-shared", "-w", "-DWASM_RT_MEMCHECK_SIGNAL_HANDLER=0", "-I.", "-I\(runtime)",
                                            "module.c", "glue.c", "\(runtime)/wasm-rt-impl.c", "-o", "module.so"], in: work)
        // Renamed into place whole: another process building the same module at once finds either none or all of it.
        guard rename("\(work)/module.so", library) == 0 else { throw Failure(description: "cannot write \(library): \(String(cString: strerror(errno)))") }
        return library
    }

    /// systemd's `CacheDirectory=`, else the user's cache, else /tmp.
    static func cacheDirectory(_ environment: [String: String]) -> String {
        if let systemd = environment["CACHE_DIRECTORY"]?.split(separator: ":").first { return "\(systemd)/filters" }
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return "\(xdg)/gatewayd/filters" }
        if let home = environment["HOME"], home.hasPrefix("/"), home != "/" { return "\(home)/.cache/gatewayd/filters" }
        return "/tmp/gatewayd-\(getuid())/filters"
    }

    private static func runtimeDirectory(_ environment: [String: String]) -> String? {
        let candidates = [environment["GATEWAYD_WASM2C_RUNTIME"], "/usr/share/wabt/wasm2c", "/usr/src/wasm2c", "/usr/local/share/wabt/wasm2c"]
        return candidates.compactMap { $0 }.first { FileManager.default.fileExists(atPath: "\($0)/wasm-rt-impl.c") }
    }

    /// Runs `tool` (found on PATH) in `directory`; fails with the first lines it printed.
    private static func run(_ tool: String, _ arguments: [String], in directory: String) throws(Failure) {
        let (code, printed): (Int32, Data)
        do {
            (code, printed) = try ChildProcess.run(tool, arguments, directory: directory)
        } catch where error.code == ENOENT {
            throw Failure(description: "\(tool) is not installed (engine: compiled needs wasm2c from Debian's wabt package and a C compiler)")
        } catch {
            throw Failure(description: error.description)
        }
        guard code != 0 else { return }
        let lines = String(decoding: printed, as: UTF8.self).split(separator: "\n").prefix(3).joined(separator: "; ")
        throw Failure(description: "\(tool) failed (status \(code)): \(lines)")
    }

    /// FNV-1a, 64 bits: two of them with different seeds name a module in
    /// the cache (not a defence: whoever can write the cache can run code as gatewayd).
    private static func hash(_ bytes: [UInt8], seed: UInt64) -> String {
        var hash = seed
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
