import Config
import EventLoop

/// The tokens uploads carry, as analytics sees them: header values and the generation they
/// belong to. The proxy builds one from its provider's token snapshot, so this module needs
/// nothing from the credentials module.
public struct UploadToken: Sendable {
    /// Increases with every change of tokens (0: none yet).
    public let generation: UInt64
    /// `"<type> <access token>"`, when there is one.
    public let accessToken: String?
    /// `"<type> <id_token>"`, when there is one.
    public let idToken: String?

    /// A token version.
    public init(generation: UInt64, accessToken: String?, idToken: String?) {
        self.generation = generation
        self.accessToken = accessToken
        self.idToken = idToken
    }

    /// No tokens.
    public static let none = UploadToken(generation: 0, accessToken: nil, idToken: nil)

    /// The header value for `kind`, nil when that token is missing (or `kind` is none).
    func value(for kind: CredentialKind) -> String? {
        switch kind {
        case .accessToken: accessToken
        case .jwt: idToken
        case .none: nil
        }
    }
}

/// Gets newer tokens after the analytics endpoint refused the current ones (an OAuth
/// provider's single-flight refresher, adapted by the proxy).
public protocol UploadTokenRefresher: AnyObject {
    /// Asks for tokens newer than `generation`; `done` runs on `caller` with true once newer
    /// tokens were handed to the uploader (through `AnalyticsService.credentialsChanged`).
    func refreshAfterRejection(seen generation: UInt64, replyOn caller: EventLoop, _ done: @escaping (Bool) -> Void)
}
