import Credentials

/// One configured provider's login state as the scraping loop holds it (its `ProviderSlot`'s
/// snapshot): the name, the state and the expiry only, never a token or a subject.
struct ProviderGauge: Sendable, Equatable {
    /// The provider's name in the config (`default` for the single `provider`).
    var name: String
    /// The state `/_platform/auth` reports for it.
    var state: AuthState
    /// Whether its routes are sent with credentials (`AuthStatus.loggedIn`).
    var loggedIn: Bool
    /// When the access token in use expires (Unix seconds); nil when unknown.
    var expiresAt: Double?

    /// `status` reduced to what the metrics show.
    init(name: String, status: AuthStatus) {
        self.name = name
        state = status.state
        loggedIn = status.loggedIn
        expiresAt = status.expiresAt
    }
}

extension PrometheusText {
    /// Every configured provider's login state, in config order: a 0/1 gauge to alert on, the
    /// state as a set of 0/1 series (one per `AuthState`), and the token's expiry. The expiry
    /// series is left out while the provider is not logged in or its expiry is unknown (a
    /// static token without an id_token `exp`), so `expiry - time() < …` alerts never see a 0.
    static func render(providers: [ProviderGauge]) -> String {
        var out = ""
        header(
            &out, "platform_proxy_provider_logged_in", "gauge",
            "1 while the provider's routes are sent with credentials (logged in or refreshing), else 0, by provider.")
        for provider in providers {
            out +=
                "platform_proxy_provider_logged_in{provider=\"\(escape(provider.name))\"} \(provider.loggedIn ? 1 : 0)\n"
        }
        header(
            &out, "platform_proxy_provider_state", "gauge",
            "1 for the provider's login state (as /_platform/auth reports it), 0 for the other states, by provider.")
        for provider in providers {
            let label = "provider=\"\(escape(provider.name))\""
            for state in AuthState.allCases {
                out +=
                    "platform_proxy_provider_state{\(label),state=\"\(state.rawValue)\"} \(provider.state == state ? 1 : 0)\n"
            }
        }
        header(
            &out, "platform_proxy_provider_token_expiry_timestamp_seconds", "gauge",
            "Unix time the provider's access token expires, while logged in and when known, by provider.")
        for provider in providers where provider.loggedIn {
            guard let expiry = provider.expiresAt, expiry.isFinite else { continue }
            out +=
                "platform_proxy_provider_token_expiry_timestamp_seconds{provider=\"\(escape(provider.name))\"} \(Self.seconds(expiry))\n"
        }
        return out
    }

    /// Whole seconds as an integer, or in exponent form (`1e+19`, which Prometheus reads) beyond
    /// what an integer holds: the expiry comes from the provider's `expires_in` or a token's
    /// `exp`, and converting a huge one to `Int` would trap.
    static func seconds(_ value: Double) -> String {
        let rounded = value.rounded()
        return abs(rounded) < 1e15 ? String(Int(rounded)) : "\(rounded)"
    }
}
