/// A validator an embedding program adds after every route's configured
/// chain: it sees each try's outcome and answers like a configured one
/// (`next`, `accept`, `fail`, `pass`, `retry`). Return `.next` to leave the
/// decision to the rest of the chain and the route's retry policy.
public protocol ResponseValidator: Sendable {
    /// True when it looks at the body: the gateway then holds answers (up to
    /// `limits.max_body_bytes`) until it has decided.
    var readsBody: Bool { get }
    /// What the try's `outcome` on the route named `route` leads to.
    func validate(_ outcome: TryOutcome, route: String) -> ValidatorSpec.Action
}

extension ResponseValidator {
    /// By default a validator reads the head only.
    public var readsBody: Bool { false }
    /// Shown in logs and in the 502 problem when it fails a response.
    var label: String { "validator \(type(of: self))" }
}
