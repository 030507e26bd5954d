import Analytics
import Credentials
import EventLoop
import Experiments
import Upstream

/// Everything a loop's `ProxyHandler` is made with, decided by `ProxyService` before the loop
/// runs: nothing is set on the handler after `init` (a reload swaps its runtime, a token change
/// its snapshots; both arrive as tasks on the loop).
public struct ProxyHandlerParameters {
    /// This loop's compiled copy of the runtime in force (`ProxyRuntime.forLoop`).
    public var runtime: ProxyRuntime
    /// The loop the handler serves on.
    public var loop: EventLoop
    /// The loop's index among the server's loops; loop 0 is the home loop (token uploads, logins).
    public var loopIndex: Int
    /// Gathers every loop's counters for the Prometheus text.
    public var hub: MetricsHub
    /// This loop's libcurl multi handle, made first so the providers' managers can share the home loop's.
    public var upstream: UpstreamClient
    /// Each OAuth provider's token lifecycle, by provider name (empty without OAuth providers).
    public var managers: [String: CredentialManager] = [:]
    /// Each provider's tokens before its first change reaches the loop, by provider name.
    public var initialSnapshots: [String: CredentialSnapshot] = [:]
    /// Phased logins in progress, shared by every loop (a callback may arrive on any of them).
    public var loginChains: LoginChains
    /// The analytics sidecar, when configured.
    public var analytics: AnalyticsService?
    /// Experiment overrides, exposures and the installation id.
    public var experiments: ExperimentService?
    /// Index of the `metricsListen` address among the server's listeners, when there is one.
    public var metricsListener: Int?
    /// The process's tunnel counts and caps, shared by every loop.
    public var tunnelAdmission = TunnelAdmission()

    public init(
        runtime: ProxyRuntime, loop: EventLoop, loopIndex: Int, hub: MetricsHub, upstream: UpstreamClient,
        loginChains: LoginChains
    ) {
        self.runtime = runtime
        self.loop = loop
        self.loopIndex = loopIndex
        self.hub = hub
        self.upstream = upstream
        self.loginChains = loginChains
    }
}
