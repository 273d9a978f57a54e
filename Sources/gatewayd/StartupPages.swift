#if canImport(Glibc)
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
        for mapping in readOnlyMappings() { _ = madvise(mapping.start, mapping.count, MADV_DONTNEED) }
    }

    /// The executable's `r-xp` and `r--p` mappings that hold no anonymous (written) page, from /proc/self/smaps.
    private static func readOnlyMappings() -> [(start: UnsafeMutableRawPointer, count: Int)] {
        guard let executable = link("/proc/self/exe"), let smaps = fopen("/proc/self/smaps", "r") else { return [] }
        defer { fclose(smaps) }
        var found: [(start: UnsafeMutableRawPointer, count: Int)] = []
        var candidate: (start: UInt, end: UInt)?
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, smaps) > 0, let line {
            let fields = String(cString: line).split(whereSeparator: { $0 == " " || $0 == "\n" })
            if fields.count >= 6, fields[1] == "r-xp" || fields[1] == "r--p", fields[0].contains("-") {
                let path = fields[5...].joined(separator: " ")
                let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
                candidate = path == executable && bounds.count == 2 ? (bounds[0], bounds[1]) : nil
            } else if fields.first == "Anonymous:", let (start, end) = candidate {
                candidate = nil
                if fields.count > 1, fields[1] == "0", end > start, let pointer = UnsafeMutableRawPointer(bitPattern: start) {
                    found.append((pointer, Int(end - start)))
                }
            } else if fields.count >= 2, fields[0].contains("-"), fields[0].first?.isHexDigit == true {
                candidate = nil
            }
        }
        return found
    }

    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

#else
enum StartupPages {
    static func release() {}
}
#endif
