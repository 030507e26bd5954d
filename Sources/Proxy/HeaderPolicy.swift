import HTTP1

/// Which headers cross the proxy, in each direction (SPEC "Proxying rules").
enum HeaderPolicy {
    /// Hop-by-hop fields (RFC 9110 §7.6.1) and the framing fields curl sets itself.
    private static let neverForwarded: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "host", "content-length", "expect", "x-proxy-key",
    ]
    /// Fields the proxy sets itself, replacing or extending the client's.
    private static let setByProxy: Set<String> = [
        "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "via", "x-request-id",
    ]
    /// Hop-by-hop fields not relayed from an upstream response; the framing is ours.
    private static let responseDropped: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "x-request-id",
    ]

    /// The upstream request's header lines: the client's minus hop-by-hop fields, minus any in
    /// `removing` (credential headers about to be injected), plus the forwarding fields.
    static func upstreamLines(_ head: HTTPRequestHead, peer: String, requestID: String, removing: Set<String>) -> [String] {
        var connectionListed: Set<String> = []
        var forwardedFor: String?
        var via: String?
        var host = ""
        for i in 0..<head.fieldCount {
            let name = head.name(at: i).lowercased()
            switch name {
            case "connection":
                for token in head.value(at: i).split(separator: ",") {
                    connectionListed.insert(token.trimmingCharacters().lowercased())
                }
            case "x-forwarded-for": forwardedFor = head.value(at: i)
            case "via": via = head.value(at: i)
            case "host": host = head.value(at: i)
            default: break
            }
        }
        var lines: [String] = []
        lines.reserveCapacity(head.fieldCount + 5)
        for i in 0..<head.fieldCount {
            let name = head.name(at: i)
            let lower = name.lowercased()
            if neverForwarded.contains(lower) || setByProxy.contains(lower) || connectionListed.contains(lower) || removing.contains(lower) {
                continue
            }
            let value = head.value(at: i)
            // "Name:" alone would tell curl to drop its own header; "Name;" sends it empty.
            lines.append(value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        lines.append("X-Forwarded-For: " + (forwardedFor.map { "\($0), \(peer)" } ?? peer))
        lines.append("X-Forwarded-Proto: http")
        if !host.isEmpty { lines.append("X-Forwarded-Host: \(host)") }
        lines.append("Via: " + (via.map { "\($0), 1.1 platform-proxy" } ?? "1.1 platform-proxy"))
        lines.append("X-Request-ID: \(requestID)")
        return lines
    }

    /// `lines` without the fields named in `names` (lowercased): used when a hop may not carry credentials.
    static func removing(_ names: Set<String>, from lines: [String]) -> [String] {
        lines.filter { line in
            let end = line.firstIndex { $0 == ":" || $0 == ";" } ?? line.endIndex
            return !names.contains(line[..<end].lowercased())
        }
    }

    /// The response fields relayed to the client, with the request ID added.
    static func responseFields(_ fields: [(name: String, value: String)], requestID: String) -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        out.reserveCapacity(fields.count + 1)
        for field in fields where !responseDropped.contains(field.name.lowercased()) {
            // curl hands us single lines; refuse anything that could split the response anyway.
            guard !field.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { continue }
            out.append(field)
        }
        out.append(("X-Request-ID", requestID))
        return out
    }
}

extension StringProtocol {
    /// Without surrounding spaces and tabs.
    func trimmingCharacters() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
