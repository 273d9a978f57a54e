import NIOCore

/// The call's properties for its filters, read from the exchange's record
/// when a filter asks: nothing is copied for a call whose filters read none,
/// and the upstream's address and status are the current try's.
extension ClientExchange: FilterCallInfo {
    var route: String { record.log.route }
    var upstream: String { record.log.upstream ?? "" }
    var requestID: String { record.log.requestID }
    var clientAddress: String { client.peerAddress }
    var clientPort: Int? { client.connectionFacts.peerPort }
    var localAddress: String { client.connectionFacts.localAddress }
    var tlsVersion: String? { client.connectionFacts.tlsVersion }
    var scheme: String { listener.scheme }
    var proto: String { record.log.proto.hasPrefix("HTTP/1") ? record.log.proto : "HTTP/2" }
    var startNanos: UInt64 { FilterVM.wallClockNanos() &- (NIODeadline.now() - record.log.start).nanoseconds.magnitude }
    var upstreamAddress: String? { record.log.upstreamAddress }
    var responseCode: Int? { record.log.upstreamStatus }
}
