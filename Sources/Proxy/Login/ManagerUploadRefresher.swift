import Analytics
import Credentials
import EventLoop

extension UploadToken {
    /// The upload headers of a provider's token snapshot.
    init(_ snapshot: CredentialSnapshot) {
        self.init(
            generation: snapshot.generation, accessToken: snapshot.accessTokenValue, idToken: snapshot.idTokenValue)
    }
}

/// Analytics' view of a provider's single-flight refresher: a 401 from the analytics endpoint
/// refreshes like a proxied 401 (subject to `minRefreshIntervalSeconds`).
final class ManagerUploadRefresher: UploadTokenRefresher {
    let manager: CredentialManager
    init(_ manager: CredentialManager) { self.manager = manager }

    func refreshAfterRejection(seen generation: UInt64, replyOn caller: EventLoop, _ done: @escaping (Bool) -> Void) {
        manager.refresh(seen: generation, after401: true, replyOn: caller) { outcome in
            if case .ready = outcome { done(true) } else { done(false) }
        }
    }
}
