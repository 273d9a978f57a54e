import NIOCore
import NIOHTTP2

/// RFC 9113 §5.4.1: after a GOAWAY for a connection error the connection
/// closes. NIOHTTP2Handler writes that GOAWAY (protocol, compression, frame
/// size errors, a peer it calms down) but leaves the socket open; this sees
/// the frame go out and closes the connection once the loop has flushed it.
/// A graceful GOAWAY (NO_ERROR: idle, drain) lets open streams finish.
struct CloseAfterErrorGoAway: NIOHTTP2FrameDelegate {
    let channel: Channel

    func wroteFrame(_ frame: HTTP2Frame) {
        guard case .goAway(_, let code, _) = frame.payload, code != .noError else { return }
        let channel = channel
        channel.eventLoop.execute { channel.close(promise: nil) }
    }
}
