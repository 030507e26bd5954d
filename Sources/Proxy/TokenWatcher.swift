import Config
import Credentials

/// Watches the configured token sources from the lifecycle thread. For the `static` grant it
/// re-reads token files when they change; other grants bring their own lifecycle.
final class TokenWatcher {
    private let source: StaticCredentialSource?

    init(_ provider: ProviderConfiguration?) {
        if let provider, provider.grant == .staticTokens {
            source = StaticCredentialSource(accessToken: provider.accessToken, idToken: provider.idToken,
                                            tokenType: provider.tokenType)
        } else {
            source = nil
        }
    }

    /// A new snapshot when the tokens changed since the last call.
    func poll() -> CredentialSnapshot? { source?.poll() }
}
