/// An upgraded call's answer: the 101 to the client with its Upgrade, then
/// both connections one tunnel until either closes (then the call's access
/// line: bytes each way, duration).
extension ClientExchange {
    func openTunnel(_ head: ResponseHead, for call: Call, to connection: any UpstreamConnection) {
        guard let clientEnd = client as? any TunnelEnd, let upstreamEnd = connection as? any TunnelEnd else {
            connection.close()
            return client.close()
        }
        record.tryAnswered(status: 101, now: now)
        client.write(.head(head.switchedForClient(asked: call.request.headers["Upgrade"], requestID: call.requestID,
                                                  rules: call.route.config.responseHeaders)))
        client.flush()
        let tunnel = Tunnel(client: clientEnd, upstream: upstreamEnd, idleTimeout: listener.config.limits.idleTimeout.timeAmount,
                            on: client.eventLoop) { [self] tunnel in
            record.log.bytes = tunnel.bytesFromUpstream
            record.log.requestBytes = tunnel.bytesFromClient
            writeRecord(status: 101, outcome: "tunnel-closed")
        }
        guard connection.startTunnel(tunnel), client.startTunnel(tunnel) else { return tunnel.close() }
    }
}
