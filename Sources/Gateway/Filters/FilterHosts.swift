import CoreMetrics
import Logging
import NIOCore
import Rewriter

/// Each event loop's filter VMs for one config: built on first use on
/// their loop and used only there, so a call never takes a lock to reach
/// them. A reload builds new ones; calls in flight keep the VMs they started with.
final class FilterHosts: @unchecked Sendable {
    private let hosts: [ObjectIdentifier: LoopFilters]

    init(config: GatewayConfig, pools: UpstreamPools, loops: [any EventLoop], logger: Logger, shared: FilterSharedState) {
        var hosts: [ObjectIdentifier: LoopFilters] = [:]
        if !config.filters.isEmpty {
            for loop in loops {
                hosts[ObjectIdentifier(loop)] = LoopFilters(loop: loop, pool: pools.pool(for: loop), config: config, logger: logger, shared: shared)
            }
        }
        self.hosts = hosts
    }

    func host(for loop: any EventLoop) -> LoopFilters? { hosts[ObjectIdentifier(loop)] }
}

/// One event loop's VMs, one per filter, and what they reach: the loop's
/// upstream pool for their HTTP calls, its timers for their ticks.
final class LoopFilters: FilterVMSource {
    private let loop: any EventLoop
    /// By the filter's name; a few, so a walk costs less than hashing the name.
    private var vms: [(name: String, vm: FilterVM)] = []
    private let services: FilterServices
    private let failures: any MetricsFactory

    init(loop: any EventLoop, pool: UpstreamPool, config: GatewayConfig, logger: Logger, shared: FilterSharedState) {
        self.loop = loop
        failures = shared.factory
        let maxBody = config.limits.maxResponseBodyBytes
        services = FilterServices(
            logger: logger, shared: shared,
            httpCall: { call, answered in
                guard let upstream = config.upstreams.first(where: { $0.name == call.upstream }) else { return false }
                let pseudo = Dictionary(call.headers.filter { $0.name.hasPrefix(":") }.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
                var headers = HeaderList()
                for field in call.headers where !field.name.hasPrefix(":") && !FilterExchange.isFraming(field.name) {
                    headers.add(field.name, field.value)
                }
                if let authority = pseudo[":authority"], !headers.contains("Host") { headers.set("Host", authority) }
                let request = UpstreamRequest(method: pseudo[":method"] ?? "GET", target: pseudo[":path"] ?? "/", headers: headers,
                                              body: call.body.isEmpty ? nil : call.body)
                pool.ownCall(request, upstream: upstream, timeout: call.timeout, maxBodyBytes: maxBody).assumeIsolated().whenComplete {
                    answered($0.mapError { $0 })
                }
                return true
            },
            scheduleTick: { vm, period in Self.tick(vm, every: period, on: loop) })
    }

    /// The VM's next tick. Each timer holds the VM weakly and nothing else
    /// of it (a nested function calling itself would hold it strongly), so a
    /// VM a reload retired is released and its ticks stop.
    static func tick(_ vm: FilterVM, every period: Duration, on loop: any EventLoop) {
        loop.assumeIsolated().scheduleTask(in: period.timeAmount) { [weak vm] in
            guard let vm, vm.tick() else { return }
            tick(vm, every: period, on: loop)
        }
    }

    /// The filter's VM on this loop, built anew after a failure broke the last one.
    func vm(_ filters: [FilterConfig], _ index: Int) throws(FilterFailure) -> FilterVM {
        let name = filters[index].name
        let found = vms.firstIndex { $0.name == name }
        if let found, vms[found].vm.broken == nil { return vms[found].vm }
        if let found { vms.remove(at: found) }
        let vm = try FilterVM.start(filters[index], services: services)
        vms.append((name, vm))
        return vm
    }

    /// A filter failed: counted, and logged under its name.
    func failed(_ failure: FilterFailure, failedOpen: Bool, info: any FilterCallInfo) {
        Counter(label: "gatewayd_filter_failures_total", dimensions: [("filter", failure.filter), ("fail_open", String(failedOpen))],
                factory: failures).increment()
        services.logger.error("filter failed", metadata: [
            "filter": .string(failure.filter), "reason": .string(failure.reason), "route": .string(info.route),
            "request_id": .string(info.requestID), "fail_open": .stringConvertible(failedOpen),
        ])
    }
}
