import Analytics
import Credentials

/// The Prometheus text exposition format (version 0.0.4).
enum PrometheusText {
    static func render(_ m: MetricsSnapshot, open: Int, reloads: ReloadStatus) -> String {
        var out = ""
        header(&out, "platform_proxy_requests_total", "counter", "Requests answered, by route and status.")
        for (key, value) in m.requests.sorted(by: { ($0.key.route, $0.key.status) < ($1.key.route, $1.key.status) }) {
            out += "platform_proxy_requests_total{route=\"\(escape(key.route))\",status=\"\(key.status)\"} \(value)\n"
        }
        header(
            &out, "platform_proxy_request_duration_seconds", "histogram",
            "Time from a request head to the end of its response, by route.")
        for (route, histogram) in m.latency.sorted(by: { $0.key < $1.key }) {
            let label = "route=\"\(escape(route))\""
            var cumulative = 0
            for (bound, count) in zip(LatencyHistogram.bounds, histogram.counts) {
                cumulative += count
                out += "platform_proxy_request_duration_seconds_bucket{\(label),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "platform_proxy_request_duration_seconds_bucket{\(label),le=\"+Inf\"} \(histogram.count)\n"
            out += "platform_proxy_request_duration_seconds_sum{\(label)} \(histogram.sum)\n"
            out += "platform_proxy_request_duration_seconds_count{\(label)} \(histogram.count)\n"
        }
        perRoute(
            &out, "platform_proxy_credentials_injected_total", "Requests sent upstream with injected credentials.",
            m.injected)
        perRoute(
            &out, "platform_proxy_credentials_stripped_total",
            "Redirect hops to hosts outside credentialHosts, sent without credentials.", m.stripped)
        header(
            &out, "platform_proxy_upstream_errors_total", "counter",
            "Upstream transfers that failed, by route and kind.")
        for (key, value) in m.upstreamErrors.sorted(by: { ($0.key.route, $0.key.kind) < ($1.key.route, $1.key.kind) }) {
            out +=
                "platform_proxy_upstream_errors_total{route=\"\(escape(key.route))\",kind=\"\(key.kind)\"} \(value)\n"
        }
        header(
            &out, "platform_proxy_gate_held_total", "counter",
            "Requests stopped by the awaiting-authorization gate (rejected or held), by route and provider.")
        for (key, value) in m.gateRejections.sorted(by: { ($0.key.route, $0.key.kind) < ($1.key.route, $1.key.kind) }) {
            out +=
                "platform_proxy_gate_held_total{route=\"\(escape(key.route))\",provider=\"\(escape(key.kind))\"} \(value)\n"
        }
        perRoute(
            &out, "platform_proxy_retries_after_401_total",
            "Requests retried once after an upstream 401 and a refresh.", m.retries401)
        perRoute(
            &out, "platform_proxy_echoed_credentials_masked_total",
            "Occurrences of the injected token masked in response headers and bodies.", m.echoMasked)
        perRoute(
            &out, "platform_proxy_mock_recorded_total", "Responses written to a mock folder in record mode.",
            m.mockRecorded)
        header(&out, "platform_proxy_tunnels_open", "gauge", "Tunnels (WebSockets, other upgrades) open now, by route.")
        for (route, value) in m.tunnelsOpen.sorted(by: { $0.key < $1.key }) {
            out += "platform_proxy_tunnels_open{route=\"\(escape(route))\"} \(value)\n"
        }
        perRoute(&out, "platform_proxy_tunnels_opened_total", "Tunnels whose upstream answered 101.", m.tunnelsOpened)
        header(
            &out, "platform_proxy_tunnels_closed_total", "counter", "Tunnels closed or refused, by route and reason.")
        for (key, value) in m.tunnelsClosed.sorted(by: { ($0.key.route, $0.key.kind) < ($1.key.route, $1.key.kind) }) {
            out +=
                "platform_proxy_tunnels_closed_total{route=\"\(escape(key.route))\",reason=\"\(escape(key.kind))\"} \(value)\n"
        }
        header(
            &out, "platform_proxy_config_reloads_total", "counter",
            "Config reloads (SIGHUP or a changed file), by result.")
        out += "platform_proxy_config_reloads_total{result=\"ok\"} \(reloads.ok)\n"
        out += "platform_proxy_config_reloads_total{result=\"failed\"} \(reloads.failed)\n"
        single(
            &out, "platform_proxy_config_last_reload_success", "gauge",
            "1 when the last config load (start or reload) succeeded, else 0.", reloads.lastSucceeded ? 1 : 0)
        single(
            &out, "platform_proxy_config_last_reload_success_timestamp_seconds", "gauge",
            "Unix time of the last successful config load.", Int(reloads.lastSuccessTime))
        single(&out, "platform_proxy_open_connections", "gauge", "Open client connections.", open)
        return out
    }

    /// The standard process metrics (names as the Prometheus client libraries use them) and build info.
    static func render(process p: ProcessStats, profile: String?) -> String {
        var out = ""
        single(
            &out, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", p.cpuSeconds)
        single(&out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", p.residentBytes)
        single(&out, "process_open_fds", "gauge", "Open file descriptors.", p.openDescriptors)
        single(&out, "process_max_fds", "gauge", "The open file descriptor limit.", p.maxDescriptors)
        single(
            &out, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.",
            p.startTime)
        header(&out, "platform_proxy_build_info", "gauge", "Always 1; the labels name the running build.")
        out +=
            "platform_proxy_build_info{version=\"\(escape(ProxyService.version))\",profile=\"\(escape(profile ?? ""))\"} 1\n"
        return out
    }

    /// Token refreshes by provider and outcome.
    static func render(refreshes all: [(provider: String, counters: RefreshCounters)]) -> String {
        var out = ""
        header(
            &out, "platform_proxy_token_refreshes_total", "counter",
            "Token refreshes (and client-credentials fetches), by provider and outcome.")
        for (provider, r) in all {
            let label = "provider=\"\(escape(provider))\""
            out += "platform_proxy_token_refreshes_total{\(label),outcome=\"ok\"} \(r.ok.load(ordering: .relaxed))\n"
            out +=
                "platform_proxy_token_refreshes_total{\(label),outcome=\"refused\"} \(r.refused.load(ordering: .relaxed))\n"
            out +=
                "platform_proxy_token_refreshes_total{\(label),outcome=\"unavailable\"} \(r.unavailable.load(ordering: .relaxed))\n"
        }
        header(
            &out, "platform_proxy_token_refreshes_suppressed_total", "counter",
            "Upstream 401s relayed without a refresh: the token was younger than minRefreshIntervalSeconds.")
        for (provider, r) in all {
            out +=
                "platform_proxy_token_refreshes_suppressed_total{provider=\"\(escape(provider))\"} \(r.suppressed.load(ordering: .relaxed))\n"
        }
        return out
    }

    /// The analytics sidecar's counters.
    static func render(analytics a: AnalyticsCounters) -> String {
        var out = ""
        header(
            &out, "platform_proxy_analytics_queued_total", "counter",
            "Analytics values committed and acknowledged with 202.")
        out += "platform_proxy_analytics_queued_total \(a.queued.load(ordering: .relaxed))\n"
        header(&out, "platform_proxy_analytics_sent_total", "counter", "Analytics values the endpoint accepted.")
        out += "platform_proxy_analytics_sent_total \(a.sent.load(ordering: .relaxed))\n"
        header(&out, "platform_proxy_analytics_dropped_total", "counter", "Analytics values dropped, by reason.")
        for (reason, value) in [
            ("rejected", a.droppedRejected.load(ordering: .relaxed)),
            ("expired", a.droppedExpired.load(ordering: .relaxed)),
            ("cap", a.droppedCap.load(ordering: .relaxed)), ("bytes", a.droppedBytes.load(ordering: .relaxed)),
            ("duplicate", a.droppedDuplicate.load(ordering: .relaxed)),
        ] {
            out += "platform_proxy_analytics_dropped_total{reason=\"\(reason)\"} \(value)\n"
        }
        header(
            &out, "platform_proxy_analytics_commits_total", "counter",
            "Analytics store transactions (each one fsync of the WAL).")
        out += "platform_proxy_analytics_commits_total \(a.commits.load(ordering: .relaxed))\n"
        header(&out, "platform_proxy_analytics_queue_depth", "gauge", "Analytics values stored and not yet sent.")
        out += "platform_proxy_analytics_queue_depth \(a.depth.load(ordering: .relaxed))\n"
        header(
            &out, "platform_proxy_analytics_last_upload_timestamp_seconds", "gauge",
            "Unix time of the last accepted upload (0: none).")
        out += "platform_proxy_analytics_last_upload_timestamp_seconds \(a.lastUpload.load(ordering: .relaxed))\n"
        header(
            &out, "platform_proxy_analytics_store_set_aside_total", "counter",
            "Damaged analytics stores set aside at start (a new store was started; the log names the file).")
        out += "platform_proxy_analytics_store_set_aside_total \(a.storeSetAside.load(ordering: .relaxed))\n"
        header(
            &out, "platform_proxy_analytics_store_full", "gauge",
            "1 while the analytics store's disk is full and values are refused with 507 (as of the last write or readiness check)."
        )
        out += "platform_proxy_analytics_store_full \(a.storeFull.load(ordering: .relaxed) ? 1 : 0)\n"
        header(
            &out, "platform_proxy_analytics_refused_full_total", "counter",
            "Analytics values refused with 507 because the store's disk was full.")
        out += "platform_proxy_analytics_refused_full_total \(a.refusedFull.load(ordering: .relaxed))\n"
        return out
    }

    /// A metric with one unlabelled sample.
    private static func single<V>(_ out: inout String, _ name: String, _ type: String, _ help: String, _ value: V) {
        header(&out, name, type, help)
        out += "\(name) \(value)\n"
    }

    static func header(_ out: inout String, _ name: String, _ type: String, _ help: String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    private static func perRoute(_ out: inout String, _ name: String, _ help: String, _ values: [String: Int]) {
        header(&out, name, "counter", help)
        for (route, value) in values.sorted(by: { $0.key < $1.key }) {
            out += "\(name){route=\"\(escape(route))\"} \(value)\n"
        }
    }

    /// Label values escape backslash, double quote and newline.
    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
