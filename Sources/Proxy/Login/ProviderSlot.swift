import Credentials
import EventLoop

/// One provider's state on one loop: its token snapshot, its manager (OAuth grants), the
/// requests its gate holds and its per-route caches. Touched only on the loop.
final class ProviderSlot {
    let name: String
    /// The tokens in force; replaced by `credentialsChanged`.
    var snapshot: CredentialSnapshot = .empty
    /// The token lifecycle (OAuth grants); nil for the static grant.
    var manager: CredentialManager?
    /// Requests held by this provider's gate in `wait` mode, released by its login or their timer.
    var gated: [GatedRequest] = []
    /// Injected header lines per route, formatted once per token generation.
    var injectedLines = InjectedLineCache()
    /// The tokens to mask in echoes, copied per token generation.
    var echoTokens = EchoTokenCache()
    /// Token-exchange routes' own tokens (`ExchangedLineCache`).
    var exchangedLines = ExchangedLineCache()

    init(name: String) { self.name = name }
}

/// A request held by the gate (`gate.mode: wait`).
struct GatedRequest {
    /// The exchange's context, owned by the exchange (its delegate) while the request waits.
    weak var context: ExchangeContext?
    let resume: () -> Void
    let timer: TimerID
}
