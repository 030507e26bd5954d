import Config
import Credentials

/// Watches the configured token sources from the lifecycle thread. For each `static`
/// provider it re-reads token files when they change; other grants bring their own lifecycle.
final class TokenWatcher {
    private let sources: [(name: String, source: StaticCredentialSource)]

    init(_ providers: [NamedProvider]) {
        sources = providers.filter { $0.configuration.grant == .staticTokens }.map { named in
            let provider = named.configuration
            return (
                named.name,
                StaticCredentialSource(
                    accessToken: provider.accessToken, idToken: provider.idToken,
                    tokenType: provider.tokenType)
            )
        }
    }

    /// The static providers' names.
    var names: [String] { sources.map(\.name) }

    /// A new snapshot for each provider whose tokens changed since the last call.
    func poll() -> [(provider: String, snapshot: CredentialSnapshot)] {
        sources.compactMap { entry in entry.source.poll().map { (entry.name, $0) } }
    }
}
