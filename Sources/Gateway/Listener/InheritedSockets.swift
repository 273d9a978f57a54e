import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Listening sockets handed over by a service manager (systemd socket
/// activation: `LISTEN_FDS` descriptors from 3 on, for `LISTEN_PID`), each
/// used by the listener whose address it is bound to.
public struct InheritedSockets: Sendable {
    private var byAddress: [SocketAddressSpec: CInt] = [:]

    /// No inherited sockets: every listener binds its own.
    public init() {}

    /// The descriptors systemd passed to this process, if any.
    public static func fromEnvironment(_ environment: [String: String]) -> InheritedSockets {
        var sockets = InheritedSockets()
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int32.init), count > 0
        else { return sockets }
        for fd in 3..<(3 + count) {
            if let address = boundAddress(fd) { sockets.byAddress[address] = fd }
        }
        return sockets
    }

    /// The inherited socket bound to `address` (taken: each is used once).
    mutating func take(_ address: SocketAddressSpec) -> CInt? {
        byAddress.removeValue(forKey: address)
    }

    private static func boundAddress(_ fd: CInt) -> SocketAddressSpec? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        let address: SocketAddress
        switch Int32(storage.ss_family) {
        case AF_INET: address = withUnsafeBytes(of: storage) { SocketAddress($0.load(as: sockaddr_in.self)) }
        case AF_INET6: address = withUnsafeBytes(of: storage) { SocketAddress($0.load(as: sockaddr_in6.self)) }
        default: return nil
        }
        guard let host = address.ipAddress, let port = address.port else { return nil }
        return SocketAddressSpec(host: host, port: port)
    }
}
