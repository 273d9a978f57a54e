import Glibc

/// WASI preview1, as far as the SDKs' runtimes call it in a proxy: standard
/// output and error into the operational log under the filter's name,
/// clocks, randomness, the environment the config allows, no arguments, no
/// files (`BADF`), and `proc_exit` ending the VM.
extension FilterVM {
    private static func errno(_ errno: ProxyWasm.Errno) -> Int32 { errno.rawValue }

    static let wasiFunctions: [String: HostFunction] = [
        "fd_write": .init { vm, a in
            guard a[0] == 1 || a[0] == 2 else { return errno(.badf) }
            guard let memory = vm.memory else { return errno(.fault) }
            var text: [UInt8] = []
            for index in 0..<a[2] {
                let (vector, overflow) = a[1].addingReportingOverflow(index &* 8)
                guard !overflow, index < 1024, let base = memory.readUInt32(vector), let length = memory.readUInt32(vector &+ 4),
                    let bytes = memory.read(base, count: length)
                else { return errno(.fault) }
                text += bytes
            }
            guard memory.write(UInt32(text.count), at: a[3]) else { return errno(.fault) }
            let message = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .newlines)
            if !message.isEmpty { vm.log(level: a[0] == 1 ? 2 : 4, message) }
            return errno(.success)
        },
        "fd_read": .init { _, _ in errno(.badf) },
        "fd_close": .init { _, _ in errno(.badf) },
        "fd_seek": .init { _, _ in errno(.badf) },
        "fd_fdstat_get": .init { _, _ in errno(.badf) },
        "fd_fdstat_set_flags": .init { _, _ in errno(.badf) },
        "fd_filestat_get": .init { _, _ in errno(.badf) },
        "fd_prestat_get": .init { _, _ in errno(.badf) },
        "fd_prestat_dir_name": .init { _, _ in errno(.badf) },
        "path_open": .init { _, _ in errno(.badf) },
        "poll_oneoff": .init { _, _ in errno(.notsup) },
        "sched_yield": .init { _, _ in errno(.success) },
        "clock_res_get": .init { vm, a in
            vm.memory?.write(UInt64(1), at: a[1]) == true ? errno(.success) : errno(.fault)
        },
        "clock_time_get": .init { vm, a in
            let now: UInt64
            switch a[0] {
            case 0: now = FilterVM.wallClockNanos()
            case 1:
                var spec = timespec()
                clock_gettime(CLOCK_MONOTONIC, &spec)
                now = UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
            default: return errno(.inval)
            }
            return vm.memory?.write(now, at: a[2]) == true ? errno(.success) : errno(.fault)
        },
        "random_get": .init { vm, a in
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<Int(min(a[1], 65536))).map { _ in UInt8.random(in: 0...255, using: &generator) }
            guard a[1] <= 65536, vm.memory?.write(bytes, at: a[0]) == true else { return errno(.fault) }
            return errno(.success)
        },
        "environ_sizes_get": .init { vm, a in
            let entries = vm.environmentEntries
            guard vm.memory?.write(UInt32(entries.count), at: a[0]) == true,
                vm.memory?.write(UInt32(entries.reduce(0) { $0 + $1.count }), at: a[1]) == true
            else { return errno(.fault) }
            return errno(.success)
        },
        "environ_get": .init { vm, a in
            var pointer = a[0], buffer = a[1]
            for entry in vm.environmentEntries {
                guard vm.memory?.write(buffer, at: pointer) == true, vm.memory?.write(entry, at: buffer) == true else { return errno(.fault) }
                pointer &+= 4
                buffer &+= UInt32(entry.count)
            }
            return errno(.success)
        },
        "args_sizes_get": .init { vm, a in
            guard vm.memory?.write(UInt32(0), at: a[0]) == true, vm.memory?.write(UInt32(0), at: a[1]) == true else { return errno(.fault) }
            return errno(.success)
        },
        "args_get": .init { _, _ in errno(.success) },
        "proc_exit": .init { _, a in throw FilterExit(code: a[0]) },
    ]

    /// `NAME=value\0` for each variable the config lets the filter see.
    var environmentEntries: [[UInt8]] {
        filter.environment.map { Array("\($0.name)=\($0.value)".utf8) + [0] }
    }
}
