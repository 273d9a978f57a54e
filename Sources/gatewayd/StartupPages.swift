#if canImport(Glibc)
import Foundation
import Glibc

/// Lets go of the binary's pages the start-up (and each reload) touched, as
/// a kernel frees its `__init` sections after boot. Loading a config (YAML,
/// Foundation, TLS, filters) runs code spread over the whole binary, the
/// dynamic linker reads its relocations and symbols once, and the kernel's
/// read-ahead and fault-around map each touched page's neighbours: most of
/// the binary stayed resident in an idle daemon (docs/benchmarks.md, issue
/// #54). Unmapped, those pages stay in the page cache; what a call runs maps
/// back on its first use, without a read.
///
/// Only the binary's own read-only mappings (code, constants, symbols) are
/// let go, and only those holding no private page: a written page (a
/// relocated one) would be replaced by the file's. Its data is never touched.
enum StartupPages {
    static func release() {
        for mapping in readOnlyMappings() { _ = madvise(UnsafeMutableRawPointer(bitPattern: mapping.lowerBound), Int(mapping.count), MADV_DONTNEED) }
    }

    /// The executable's `r-xp` and `r--p` mappings that hold no anonymous (written) page, from /proc/self/smaps.
    private static func readOnlyMappings() -> [Range<UInt>] {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
              let smaps = try? String(contentsOfFile: "/proc/self/smaps", encoding: .utf8) else { return [] }
        var found: [Range<UInt>] = []
        var candidate: Range<UInt>?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            let bounds = fields.first?.split(separator: "-").compactMap { UInt($0, radix: 16) } ?? []
            if bounds.count == 2, bounds[0] < bounds[1] {  // a mapping's header: `start-end perms offset device inode path`
                let ours = fields.count >= 6 && (fields[1] == "r-xp" || fields[1] == "r--p") && fields[5...].joined(separator: " ") == executable
                candidate = ours ? bounds[0]..<bounds[1] : nil
            } else if fields.first == "Anonymous:", let mapping = candidate {
                candidate = nil
                if fields.count > 1, fields[1] == "0" { found.append(mapping) }
            }
        }
        return found
    }
}

#else
enum StartupPages {
    static func release() {}
}
#endif
