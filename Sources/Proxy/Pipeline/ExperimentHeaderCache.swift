import Credentials
import Experiments
import Upstream

/// A loop's `X-Experiments` line, formatted once per subject, config, override change and
/// experiment window, like the injected credential lines: a request that carries it pays one
/// clock read, one atomic load and a few identity compares.
struct ExperimentHeaderCache {
    private static let name = Array("X-Experiments".utf8)
    // Held, not just identified: a freed object's address could come back as a new one's.
    private var runtime: ProxyRuntime?
    private var credentials: CredentialSnapshot?
    private var generation: UInt64 = 0
    private var validUntil = -Double.infinity
    private var cached = HeaderLines()

    /// The line for the subject of `credentials` under `runtime`'s experiments at `now` (Unix
    /// seconds); empty when no experiment is configured.
    mutating func lines(runtime: ProxyRuntime, credentials: CredentialSnapshot, service: ExperimentService, now: Double)
        -> HeaderLines
    {
        if runtime === self.runtime, credentials === self.credentials, service.overridesGeneration == generation,
            now < validUntil
        {
            return cached
        }
        let (generation, overrides) = service.overrides()
        let experiments = runtime.experiments
        cached = HeaderLines()
        if !experiments.isEmpty {
            let value = experiments.headerValue(
                subject: service.subject(credentials).id, now: now, overrides: overrides)
            cached.append(name: Self.name, value: value.utf8)
        }
        self.runtime = runtime
        self.credentials = credentials
        self.generation = generation
        validUntil = experiments.nextChange(after: now) ?? .infinity
        return cached
    }
}
