/// The liveness and readiness endpoints, answered before the Host, key and Origin checks so that
/// container and Kubernetes probes work; they say whether the process serves and nothing more.
enum Probe {
    /// `GET /_platform/health`: 200 while the process serves.
    case health
    /// `GET /_platform/ready`: 200 when credentials are usable, else 503 with the reason.
    case ready

    /// The route name probes and metrics scrapes are logged under; they are not counted as requests.
    static let route = "_probe"
    static let headers: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
    ]

    /// The probe a path names, if any.
    init?(path: Substring) {
        switch path {
        case "/_platform/health": self = .health
        case "/_platform/ready": self = .ready
        default: return nil
        }
    }
}
