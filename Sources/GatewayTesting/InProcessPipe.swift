import Glibc
import NIOCore
import NIOPosix

/// Two channels joined by two pipes: what one writes, the other reads, and
/// no socket, port or address is involved. The gateway's side runs its own
/// pipeline; the other end is the test's client or in-process upstream.
enum InProcessPipe {
    /// Both ends on `loop`, each set up by its initializer before it is active.
    static func make(on loop: any EventLoop, near: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>,
                     far: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) -> EventLoopFuture<(near: any Channel, far: any Channel)> {
        var there: [CInt] = [0, 0]
        var back: [CInt] = [0, 0]
        guard pipe(&there) == 0 else { return loop.makeFailedFuture(IOError(errnoCode: errno, reason: "pipe")) }
        guard pipe(&back) == 0 else {
            close(there[0])
            close(there[1])
            return loop.makeFailedFuture(IOError(errnoCode: errno, reason: "pipe"))
        }
        let nearChannel = NIOPipeBootstrap(group: loop).channelInitializer(near)
            .takingOwnershipOfDescriptors(input: back[0], output: there[1])
        let farChannel = NIOPipeBootstrap(group: loop).channelInitializer(far)
            .takingOwnershipOfDescriptors(input: there[0], output: back[1])
        return nearChannel.and(farChannel).map { (near: $0.0, far: $0.1) }
    }
}
