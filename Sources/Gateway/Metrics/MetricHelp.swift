/// Each metric's `# HELP` line. swift-prometheus writes one only for a
/// metric made through its registry with help text, which swift-metrics'
/// factory API cannot pass: the lines go in when the text is served.
package enum MetricHelp {
    static let texts: [String: String] = [
        "gatewayd_requests_total": "Calls answered, by route, method and status class.",
        "gatewayd_request_duration_seconds": "Time from a call's request head to the end of its answer, by route.",
        "gatewayd_upstream_tries_total": "Tries sent to an upstream, by route and upstream.",
        "gatewayd_retries_total": "Tries sent again, by route and reason.",
        "gatewayd_validator_outcomes_total": "What a route's validators decided, by route, validator and action.",
        "gatewayd_refreshes_total": "Credential refreshes asked for, by route and result.",
        "gatewayd_refresh_calls_total": "Calls made to refresh a credential, by route and result.",
        "gatewayd_cache_lookups_total": "What a route's cache did for its calls, by route and result (hit, miss, stale, revalidated, collapsed).",
        "gatewayd_cache_stored_bytes": "Bytes of answers the cache holds now (at most cache.max_bytes).",
        "gatewayd_cache_evictions_total": "Stored answers evicted to stay within cache.max_bytes.",
        "gatewayd_active_connections": "Client connections open now.",
        "gatewayd_active_streams": "Client HTTP/2 streams open now.",
        "gatewayd_rate_limit_total": "Rate-limit decisions, by route and outcome.",
        "gatewayd_rate_limit_store_down_total": "Fleet rate-limit decisions made while the store was down, by route.",
        "gatewayd_store_up": "1 while the Redis store answers, 0 once it is down.",
        "gatewayd_store_commands_total": "Commands sent to the Redis store.",
        "gatewayd_store_failures_total": "Connections to the Redis store refused, closed or too slow (each failed reconnect counts).",
        "gatewayd_spans_exported_total": "Spans the OTLP collector took.",
        "gatewayd_spans_dropped_total": "Spans dropped, by reason: a full queue, or an export that failed.",
        "gatewayd_endpoint_requests_total": "Tries sent to an endpoint, by upstream and endpoint.",
        "gatewayd_endpoint_healthy": "1 while the health check finds an endpoint healthy, else 0.",
        "gatewayd_endpoint_ejections_total": "Times an endpoint was ejected by outlier detection.",
        "gatewayd_config_reloads_total": "Config reloads, by result.",
        "gatewayd_build_info": "The running build, by version (always 1).",
        "gatewayd_filter_failures_total": "Calls a Proxy-Wasm filter failed on (trap, fuel, memory cap), by filter and fail_open.",
    ]

    /// `exposition` (Prometheus text) with a `# HELP` line before each known metric's `# TYPE` line.
    package static func adding(to exposition: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(exposition.count + texts.count * 80)
        for line in exposition.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.starts(with: "# TYPE ".utf8) {
                let name = String(decoding: line.dropFirst(7).prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                if let text = texts[name] ?? (name.hasPrefix("gatewayd_filter_") ? "Defined by the Proxy-Wasm filter in its filter label." : nil) {
                    out.append(contentsOf: "# HELP \(name) \(text)\n".utf8)
                }
            }
            out.append(contentsOf: line)
            out.append(UInt8(ascii: "\n"))
        }
        // The split kept the last line's end as an empty line: no newline added after it.
        out.removeLast()
        return out
    }
}
