import Logging

/// Where a chain gets each filter's VM: `filters[index]`'s (the list and
/// a position, as passing one config copied it), and where its failures go.
protocol FilterVMSource: AnyObject {
    func vm(_ filters: [FilterConfig], _ index: Int) throws(FilterFailure) -> FilterVM
    /// A filter failed (`failedOpen`: its `fail_open` let the call go on).
    func failed(_ failure: FilterFailure, failedOpen: Bool, info: any FilterCallInfo)
}

/// A call's filters at work on its exchange: its request through each
/// filter in order (headers, then the body when the filter reads bodies),
/// a filter that pauses resuming the chain where it stopped, and later the
/// response through them in reverse order, as Envoy runs its encoders. It
/// keeps each filter's HTTP context until the call ends.
final class FilterRun: FilterExchange {
    enum Outcome {
        /// Every filter let the request through: the exchange holds it as it now is.
        case proceed
        /// A filter answered the client itself.
        case answer(FilterExchange.LocalResponse)
        /// A filter closed the stream: the client's connection is reset.
        case closed(filter: String)
        /// A filter failed (its `fail_open` off).
        case failed(FilterFailure)
    }

    private let filters: [FilterConfig]
    private let vms: any FilterVMSource
    private var contexts: OpenedContexts
    /// The filter at work, and how far it got.
    private var index = 0
    private var headersDone = false
    private var bodyDone = false
    private var stage = Stage.running
    /// Told the outcome of a chain that paused (set once `request()` returned nil).
    var whenResumed: ((Outcome) -> Void)?
    /// The last failure, as the access line gives it (one `fail_open` let
    /// through says so).
    private(set) var failureReason: String?

    private enum Stage {
        case running
        /// Waiting for filter `index` to continue.
        case paused
        case finished(Outcome)
        case over
    }

    /// Takes `request` over as its exchange does; `vms`: each filter's VM on
    /// this event loop (built anew when broken).
    init(filters: [FilterConfig], taking request: inout UpstreamRequest, info: any FilterCallInfo, vms: any FilterVMSource) {
        self.filters = filters
        self.vms = vms
        contexts = OpenedContexts(count: filters.count)
        super.init(taking: &request, info: info)
    }

    /// Runs the request's callbacks: their outcome, or nil when a filter
    /// paused (then `whenResumed` is told, later).
    func request() -> Outcome? {
        advance()
        guard case .finished(let outcome) = stage else { return nil }
        stage = .over
        return outcome
    }

    private func advance() {
        while index < filters.count {
            do throws(FilterFailure) {
                let (vm, context) = try open(index)
                vm.act(for: context, self)
                if !headersDone {
                    headersDone = true
                    let bodyFollows = !requestBody.isEmpty && vm.exports(.requestBody)
                    let endOfStream: UInt32 = requestBody.isEmpty ? 1 : 0
                    let action = try vm.call(.requestHeaders, [context, UInt32(FilterExchange.pseudoFieldCount + request.headers.count), endOfStream])
                    // The SDKs' "wait for the body": a pause on headers with a body to come still gets the
                    // body callback, whose Continue resumes the chain (Envoy's StopIteration on headers).
                    if stop(after: bodyFollows ? nil : action) { return }
                }
                if !bodyDone, !requestBody.isEmpty, vm.exports(.requestBody) {
                    bodyDone = true
                    let action = try vm.call(.requestBody, [context, UInt32(requestBody.count), 1])
                    if stop(after: action) { return }
                }
            } catch {
                guard failedOpen(error) else { return }
            }
            nextFilter()
        }
        finish(.proceed)
    }

    /// The filter at work failed; its VM is broken, so it takes no further
    /// part in the call. Returns whether the chain goes on (`fail_open`).
    private func failedOpen(_ failure: FilterFailure) -> Bool {
        contexts[index] = nil
        guard filters[index].failOpen else {
            finish(.failed(failure))
            return false
        }
        failed(failure, open: true)
        return true
    }

    private func nextFilter() {
        index += 1
        headersDone = false
        bodyDone = false
    }

    private func open(_ index: Int) throws(FilterFailure) -> (FilterVM, UInt32) {
        if let opened = contexts[index] { return opened }
        let vm = try vms.vm(filters, index)
        let context = try vm.open(self)
        contexts[index] = (vm, context)
        return (vm, context)
    }

    /// Whether the chain stops here: a local answer, a close, or a pause (resumed later).
    private func stop(after action: UInt32?) -> Bool {
        let pending = self.pending
        self.pending = nil
        if let local = localResponse {
            finish(.answer(local))
            return true
        }
        if case .close? = pending {
            finish(.closed(filter: filters[index].name))
            return true
        }
        // Continued inside the callback that paused: no wait.
        if action == ProxyWasm.Action.pause.rawValue, pending == nil {
            stage = .paused
            return true
        }
        return false
    }

    /// A paused filter continued, closed the stream, answered, or failed (from an HTTP call's answer or a tick).
    override func resumed(_ resumption: Resumption) {
        guard case .paused = stage else { return }
        stage = .running
        switch resumption {
        case .failed(let failure):
            guard failedOpen(failure) else { return }
            nextFilter()
            advance()
        case .close:
            finish(.closed(filter: filters[index].name))
        case .continue(_), .answered:
            if let local = localResponse { return finish(.answer(local)) }
            advance()
        }
    }

    /// The request's outcome: returned by `request()`, or told to `whenResumed` after a pause.
    private func finish(_ outcome: Outcome) {
        guard case .running = stage else { return }
        if case .failed(let failure) = outcome { failed(failure, open: false) }
        guard let whenResumed = whenResumed.take() else {
            stage = .finished(outcome)
            return
        }
        stage = .over
        whenResumed(outcome)
    }

    private func failed(_ failure: FilterFailure, open: Bool) {
        failureReason = open ? "\(failure) (fail_open)" : failure.description
        vms.failed(failure, failedOpen: open, info: info)
    }

    /// Whether a filter of the call has a response callback: without one,
    /// the response is not converted for them.
    var readsResponses: Bool {
        contexts.contains { $0.vm.exports(.responseHeaders) || $0.vm.exports(.responseBody) }
    }

    /// The response's head through the filters that saw the request, last
    /// first, then its body (when it was held whole: `body` not nil) through
    /// those that read bodies. Returns a local answer that replaces it, if
    /// one did.
    func response(status: Int, headers: inout Fields, body: inout [UInt8]?) -> Outcome {
        responseHeaders = [(":status", String(status))] + headers
        responseBody = body ?? []
        let endOfStream: UInt32 = body?.isEmpty == true ? 1 : 0
        for callback in [FilterVM.Callback.responseHeaders, .responseBody] {
            for index in contexts.indices.reversed() {
                guard let (vm, context) = contexts[index] else { continue }
                let arguments: CallbackArguments
                if callback == .responseHeaders {
                    arguments = [context, UInt32(responseHeaders.count), endOfStream]
                } else {
                    guard body?.isEmpty == false, vm.exports(callback) else { continue }
                    arguments = [context, UInt32(responseBody.count), 1]
                }
                vm.act(for: context, self)
                do throws(FilterFailure) {
                    _ = try vm.call(callback, arguments)
                } catch {
                    contexts[index] = nil
                    failed(error, open: filters[index].failOpen)
                    guard filters[index].failOpen else { return .failed(error) }
                }
                pending = nil
                if let local = localResponse { return .answer(local) }
            }
        }
        headers = responseHeaders.filter { !$0.name.hasPrefix(":") }
        if body != nil { body = responseBody }
        return .proceed
    }

    /// The call is over: each context's `proxy_on_done`, `proxy_on_log`, `proxy_on_delete`.
    func end() {
        stage = .over
        whenResumed = nil
        for index in contexts.indices {
            guard let (vm, context) = contexts[index] else { continue }
            vm.close(context, self)
            contexts[index] = nil
        }
    }
}

/// Each filter's VM and HTTP context, once opened, by the filter's position;
/// the first held inline, as most routes have one filter.
struct OpenedContexts {
    typealias Opened = (vm: FilterVM, context: UInt32)
    private var first: Opened?
    private var others: [Opened?]
    let indices: Range<Int>

    init(count: Int) {
        indices = 0..<count
        others = count > 1 ? Array(repeating: nil, count: count - 1) : []
    }

    subscript(index: Int) -> Opened? {
        get { index == 0 ? first : others[index - 1] }
        set {
            if index == 0 { first = newValue } else { others[index - 1] = newValue }
        }
    }

    func contains(where predicate: (Opened) -> Bool) -> Bool {
        indices.contains { self[$0].map(predicate) ?? false }
    }
}
