import Logging

/// A call's filters at work: its request through each filter in order
/// (headers, then the body when the filter reads bodies), a filter that
/// pauses resuming the chain where it stopped, and later the response
/// through them in reverse order, as Envoy runs its encoders. It keeps each
/// filter's HTTP context until the call ends.
/// Where a chain gets each filter's VM: `filters[index]`'s (the list and
/// a position, as passing one config copied it).
protocol FilterVMSource: AnyObject {
    func vm(_ filters: [FilterConfig], _ index: Int) throws(FilterFailure) -> FilterVM
}

final class FilterRun {
    enum Outcome {
        /// Every filter let the request through: `exchange` holds it as it now is.
        case proceed
        /// A filter answered the client itself.
        case answer(FilterExchange.LocalResponse)
        /// A filter closed the stream: the client's connection is reset.
        case closed(filter: String)
        /// A filter failed (its `fail_open` off).
        case failed(FilterFailure)
    }

    let exchange: FilterExchange
    private let filters: [FilterConfig]
    private let vms: any FilterVMSource
    private let onFailure: (FilterFailure, _ failedOpen: Bool) -> Void
    private var contexts: OpenedContexts
    /// The filter at work, and how far it got.
    private var index = 0
    private var headersDone = false
    private var bodyDone = false
    private var completion: ((Outcome) -> Void)?
    /// Waiting for filter `index` to continue.
    private var paused = false

    /// `vms`: each filter's VM on this event loop (built anew when broken).
    /// `onFailure`: told of each failure, also those let through by `fail_open`.
    init(filters: [FilterConfig], exchange: FilterExchange, vms: any FilterVMSource, onFailure: @escaping (FilterFailure, Bool) -> Void) {
        self.filters = filters
        self.exchange = exchange
        self.vms = vms
        self.onFailure = onFailure
        contexts = OpenedContexts(count: filters.count)
    }

    /// Runs the request's callbacks; `completion` once, maybe later (a filter paused).
    func request(_ completion: @escaping (Outcome) -> Void) {
        self.completion = completion
        exchange.chain = self
        advance()
    }

    private func advance() {
        while index < filters.count {
            do throws(FilterFailure) {
                let (vm, context) = try open(index)
                vm.act(for: context, exchange)
                if !headersDone {
                    headersDone = true
                    let endOfStream: UInt32 = exchange.requestBody.isEmpty ? 1 : 0
                    let action = try vm.call(.requestHeaders, [context, UInt32(FilterExchange.pseudoFieldCount + exchange.request.headers.count), endOfStream])
                    if stop(after: action) { return }
                }
                if !bodyDone, !exchange.requestBody.isEmpty, vm.exports(.requestBody) {
                    bodyDone = true
                    let action = try vm.call(.requestBody, [context, UInt32(exchange.requestBody.count), 1])
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
        onFailure(failure, true)
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
        let context = try vm.open(exchange)
        contexts[index] = (vm, context)
        return (vm, context)
    }

    /// Whether the chain stops here: a local answer, a close, or a pause (resumed later).
    private func stop(after action: UInt32?) -> Bool {
        let pending = exchange.pending
        exchange.pending = nil
        if let local = exchange.localResponse {
            finish(.answer(local))
            return true
        }
        if case .close? = pending {
            finish(.closed(filter: filters[index].name))
            return true
        }
        // Continued inside the callback that paused: no wait.
        if action == ProxyWasm.Action.pause.rawValue, pending == nil {
            paused = true
            return true
        }
        return false
    }

    /// A paused filter continued, closed the stream, answered, or failed (from an HTTP call's answer or a tick).
    func resumed(_ resumption: FilterExchange.Resumption) {
        guard paused, completion != nil else { return }
        paused = false
        switch resumption {
        case .failed(let failure):
            guard failedOpen(failure) else { return }
            nextFilter()
            advance()
        case .close:
            finish(.closed(filter: filters[index].name))
        case .continue(_), .answered:
            if let local = exchange.localResponse { return finish(.answer(local)) }
            advance()
        }
    }

    private func finish(_ outcome: Outcome) {
        guard let completion else { return }
        self.completion = nil
        if case .failed(let failure) = outcome { onFailure(failure, false) }
        completion(outcome)
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
    func response(status: Int, headers: inout FilterExchange.Fields, body: inout [UInt8]?) -> Outcome {
        exchange.responseHeaders = [(":status", String(status))] + headers
        exchange.responseBody = body ?? []
        let endOfStream: UInt32 = body?.isEmpty == true ? 1 : 0
        for callback in [FilterVM.Callback.responseHeaders, .responseBody] {
            for index in contexts.indices.reversed() {
                guard let (vm, context) = contexts[index] else { continue }
                let arguments: CallbackArguments
                if callback == .responseHeaders {
                    arguments = [context, UInt32(exchange.responseHeaders.count), endOfStream]
                } else {
                    guard body?.isEmpty == false, vm.exports(callback) else { continue }
                    arguments = [context, UInt32(exchange.responseBody.count), 1]
                }
                vm.act(for: context, exchange)
                do throws(FilterFailure) {
                    _ = try vm.call(callback, arguments)
                } catch {
                    contexts[index] = nil
                    guard filters[index].failOpen else {
                        onFailure(error, false)
                        return .failed(error)
                    }
                    onFailure(error, true)
                }
                exchange.pending = nil
                if let local = exchange.localResponse { return .answer(local) }
            }
        }
        headers = exchange.responseHeaders.filter { !$0.name.hasPrefix(":") }
        if body != nil { body = exchange.responseBody }
        return .proceed
    }

    deinit { exchange.chain = nil }

    /// The call is over: each context's `proxy_on_done`, `proxy_on_log`, `proxy_on_delete`.
    func end() {
        completion = nil
        exchange.chain = nil
        for index in contexts.indices {
            guard let (vm, context) = contexts[index] else { continue }
            vm.close(context, exchange)
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
