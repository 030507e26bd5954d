/// Where the proxy accepts connections.
public enum ListenAddress: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// A TCP listener; `host` is an IP literal (IPv6 without brackets) or "localhost"; port 0 asks for an ephemeral port.
    case tcp(host: String, port: UInt16)
    /// A Unix domain socket at an absolute path.
    case unix(path: String)

    /// The longest socket path `sockaddr_un` holds (108 bytes with the terminating NUL).
    public static let maxUnixPathBytes = 107

    /// "127.0.0.1:8080", "[::1]:8080", "localhost:0" or "unix:/run/proxy.sock".
    public var description: String {
        switch self {
        case .tcp(let host, let port):
            return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path):
            return "unix:\(path)"
        }
    }

    /// Parses "host:port", "[v6]:port" or "unix:path"; a relative unix path resolves against `directory`.
    public static func parse(_ text: String, relativeTo directory: String) -> ListenAddress? {
        try? validate(text, relativeTo: directory).get()
    }

    /// Parses a listen entry, or says why it is refused.
    static func validate(_ text: String, relativeTo directory: String) -> Result<ListenAddress, UpstreamURL.Refusal> {
        if text.hasPrefix("unix:") {
            let raw = String(text.dropFirst(5))
            guard !raw.isEmpty else { return .failure(.init("the unix socket path is empty")) }
            let path = FileSystem.resolve(raw, against: directory)
            guard path.utf8.count <= maxUnixPathBytes else {
                return .failure(.init("the unix socket path \(path) is longer than \(maxUnixPathBytes) bytes"))
            }
            return .success(.unix(path: path))
        }
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(.init("expected \"[IPv6]:port\""))
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            guard HostSyntax.isIPv6(host) else { return .failure(.init("\"\(host)\" is not an IPv6 address")) }
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                return .failure(.init("expected \"host:port\" or \"unix:/path\""))
            }
            host = String(text[..<colon])
            guard HostSyntax.isIPv4(host) || host == "localhost" else {
                return .failure(.init("the host must be an IP address or \"localhost\" (IPv6 in brackets)"))
            }
            portText = text[text.index(after: colon)...]
        }
        guard let port = HostSyntax.port(portText, in: 0...65535) else {
            return .failure(.init("the port must be a number from 0 to 65535"))
        }
        return .success(.tcp(host: host.lowercased(), port: port))
    }
}
