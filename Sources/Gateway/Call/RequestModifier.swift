import NIOCore
import Rewriter

/// A hook for programs that embed the gateway: runs after the declarative
/// header rules and may change anything of the upstream request (method,
/// target, headers, body). Throwing a `Problem` answers the client with it;
/// any other error answers 500. Hooks run in order, only on routes' calls
/// that reach an upstream (not on the gateway's own answers). For a streamed
/// pass-through request `body` is nil: its bytes are still on their way.
public protocol RequestModifier: Sendable {
    /// Changes `request` before it goes upstream: once per call, every try sends the result.
    func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws
}

/// What a modifier may want to know about the call.
public struct ModifierContext: Sendable {
    /// The route's `name`.
    public var route: String
    /// The upstream's name.
    public var upstream: String
    /// Who called.
    public var client: ClientInfo
}

extension [any RequestModifier] {
    /// The hooks over `request`, in order, as a task (an async hop); the
    /// result comes back on `eventLoop`: the request framed by the gateway
    /// whatever a hook did (a streamed body keeps the client's framing), or
    /// the `Problem` to answer.
    func modify(_ request: UpstreamRequest, context: ModifierContext, streams: Bool,
                on eventLoop: any EventLoop) -> EventLoopFuture<Result<UpstreamRequest, Problem>> {
        let promise = eventLoop.makePromise(of: Result<UpstreamRequest, Problem>.self)
        promise.completeWithTask { [self] in
            var request = request
            do {
                for modifier in self { try await modifier.modify(&request, context: context) }
                try request.checkWireSafe(route: context.route)
            } catch {
                return .failure(error as? Problem ?? .modifierFailed("\(error)", route: context.route))
            }
            request.headers.remove("Content-Length")
            request.headers.remove("Transfer-Encoding")
            if !streams { request.frameBody() }
            return .success(request)
        }
        return promise.futureResult
    }
}

extension UpstreamRequest {
    /// What a modifier produced must still be one well-formed request: NIO's
    /// outbound header validation is off (everything else the gateway sends
    /// is checked where it is made), so a CR or LF here would split it.
    func checkWireSafe(route: String) throws(Problem) {
        if let what = invalidPart { throw Problem.modifierFailed("a request modifier produced an invalid \(what)", route: route) }
    }

    /// What of the request could not be written as HTTP (nil: all of it can).
    var invalidPart: String? {
        let targetSafe = target.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
        let bad = headers.first { !HeaderList.isValidName($0.name) || !HeaderList.isValidValue($0.value) }
        guard HeaderList.isValidName(method), targetSafe, bad == nil else { return bad.map { "header \($0.name)" } ?? (targetSafe ? "method" : "target") }
        return nil
    }
}
