import Credentials
import Testing

@testable import Proxy

@Suite("Provider metrics")
struct ProviderMetricsTests {
    /// The lines of `text` that start with `prefix` (HELP and TYPE lines excluded).
    private func samples(_ text: String, _ prefix: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix + "{") }
    }

    @Test("each provider gets logged_in, one state series per state, and its expiry while logged in")
    func rendersEveryProvider() {
        let text = PrometheusText.render(providers: [
            ProviderGauge(name: "default", status: AuthStatus(state: .loggedIn, expiresAt: 1_795_388_400.4)),
            ProviderGauge(name: "ping", status: AuthStatus(state: .awaitingAuthorization, expiresAt: 1_795_000_000)),
            ProviderGauge(name: "files", status: AuthStatus(state: .refreshing)),
        ])
        #expect(
            samples(text, "platform_proxy_provider_logged_in") == [
                "platform_proxy_provider_logged_in{provider=\"default\"} 1",
                "platform_proxy_provider_logged_in{provider=\"ping\"} 0",
                "platform_proxy_provider_logged_in{provider=\"files\"} 1",
            ])
        #expect(
            samples(text, "platform_proxy_provider_state") == [
                "platform_proxy_provider_state{provider=\"default\",state=\"logged_in\"} 1",
                "platform_proxy_provider_state{provider=\"default\",state=\"logged_out\"} 0",
                "platform_proxy_provider_state{provider=\"default\",state=\"awaiting_authorization\"} 0",
                "platform_proxy_provider_state{provider=\"default\",state=\"refreshing\"} 0",
                "platform_proxy_provider_state{provider=\"ping\",state=\"logged_in\"} 0",
                "platform_proxy_provider_state{provider=\"ping\",state=\"logged_out\"} 0",
                "platform_proxy_provider_state{provider=\"ping\",state=\"awaiting_authorization\"} 1",
                "platform_proxy_provider_state{provider=\"ping\",state=\"refreshing\"} 0",
                "platform_proxy_provider_state{provider=\"files\",state=\"logged_in\"} 0",
                "platform_proxy_provider_state{provider=\"files\",state=\"logged_out\"} 0",
                "platform_proxy_provider_state{provider=\"files\",state=\"awaiting_authorization\"} 0",
                "platform_proxy_provider_state{provider=\"files\",state=\"refreshing\"} 1",
            ])
        // ping is not logged in (its old expiry is no alert input); files has no known expiry.
        #expect(
            samples(text, "platform_proxy_provider_token_expiry_timestamp_seconds") == [
                "platform_proxy_provider_token_expiry_timestamp_seconds{provider=\"default\"} 1795388400"
            ])
    }

    @Test("every family has HELP and TYPE gauge, also with no sample")
    func headers() {
        let text = PrometheusText.render(providers: [ProviderGauge(name: "a", status: AuthStatus(state: .loggedOut))])
        for name in [
            "platform_proxy_provider_logged_in", "platform_proxy_provider_state",
            "platform_proxy_provider_token_expiry_timestamp_seconds",
        ] {
            #expect(text.contains("# HELP \(name) "))
            #expect(text.contains("# TYPE \(name) gauge\n"))
        }
        #expect(samples(text, "platform_proxy_provider_token_expiry_timestamp_seconds").isEmpty)
        #expect(text.hasSuffix("\n"))
    }

    @Test("provider names are escaped as label values")
    func escapesNames() {
        let text = PrometheusText.render(providers: [
            ProviderGauge(name: "a\"b\\c\nd", status: AuthStatus(state: .loggedIn))
        ])
        #expect(
            samples(text, "platform_proxy_provider_logged_in") == [
                "platform_proxy_provider_logged_in{provider=\"a\\\"b\\\\c\\nd\"} 1"
            ])
    }
}
