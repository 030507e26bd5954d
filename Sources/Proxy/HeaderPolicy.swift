import HTTP1

/// Which headers cross the proxy, in each direction (SPEC "Proxying rules").
enum HeaderPolicy {
    /// What the policy does with a request field.
    private enum Action { case drop, forwardedFor, via, host, connection, keep }

    /// Hop-by-hop fields (RFC 9110 §7.6.1), the framing fields curl sets itself, the proxy's own
    /// key, and the fields the proxy sets: by length, then bytes, so no String is made per field.
    private static let table: [Int: [([UInt8], Action)]] = {
        let entries: [(String, Action)] = [
            ("connection", .connection), ("keep-alive", .drop), ("proxy-connection", .drop), ("te", .drop),
            ("trailer", .drop), ("transfer-encoding", .drop), ("upgrade", .drop), ("proxy-authorization", .drop),
            ("host", .host), ("content-length", .drop), ("expect", .drop), ("x-proxy-key", .drop),
            ("x-forwarded-for", .forwardedFor), ("x-forwarded-proto", .drop), ("x-forwarded-host", .drop),
            ("via", .via), ("x-request-id", .drop),
        ]
        return Dictionary(grouping: entries.map { (Array($0.0.utf8), $0.1) }, by: { $0.0.count })
    }()

    /// Hop-by-hop fields not relayed from an upstream response; the framing is ours.
    private static let responseDropped: [[UInt8]] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "x-request-id",
    ].map { Array($0.utf8) }

    /// The upstream request's header lines: the client's minus hop-by-hop fields, minus any in
    /// `removing` (lowercased credential header names about to be injected), plus the forwarding fields.
    static func upstreamLines(_ head: HTTPRequestHead, peer: String, requestID: String, removing: [[UInt8]]) -> [String] {
        var lines: [String] = []
        lines.reserveCapacity(head.fieldCount + 5)
        var forwardedFor: String?
        var via: String?
        var host: String?
        var connectionIndexes: [Int] = []
        for i in 0..<head.fieldCount {
            let length = head.fields[i].name.count
            var action = Action.keep
            if let candidates = table[length], let hit = candidates.first(where: { head.nameEquals(i, $0.0) }) {
                action = hit.1
            } else if removing.contains(where: { $0.count == length && head.nameEquals(i, $0) }) {
                action = .drop
            }
            switch action {
            case .drop: continue
            case .forwardedFor: forwardedFor = head.value(at: i)
            case .via: via = head.value(at: i)
            case .host: host = head.value(at: i)
            case .connection: connectionIndexes.append(i)
            case .keep:
                lines.append(head.fields[i].value.isEmpty ? head.name(at: i) + ";" : head.line(at: i))
            }
        }
        if !connectionIndexes.isEmpty { lines = removingConnectionListed(head, connectionIndexes, from: lines) }
        lines.append("X-Forwarded-For: " + (forwardedFor.map { "\($0), \(peer)" } ?? peer))
        lines.append("X-Forwarded-Proto: http")
        if let host, !host.isEmpty { lines.append("X-Forwarded-Host: " + host) }
        lines.append(via.map { "Via: \($0), 1.1 platform-proxy" } ?? "Via: 1.1 platform-proxy")
        lines.append("X-Request-ID: " + requestID)
        return lines
    }

    /// Drops the fields a Connection header lists (other than the usual close / keep-alive).
    private static func removingConnectionListed(_ head: HTTPRequestHead, _ indexes: [Int], from lines: [String]) -> [String] {
        var listed: Set<String> = []
        for i in indexes {
            for token in head.value(at: i).split(separator: ",") {
                let name = token.trimmingCharacters().lowercased()
                if name != "close" && name != "keep-alive" && !name.isEmpty { listed.insert(name) }
            }
        }
        return listed.isEmpty ? lines : removing(listed, from: lines)
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
        for field in fields where !isResponseDropped(field.name) {
            // curl hands us single lines; refuse anything that could split the response anyway.
            guard !field.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { continue }
            out.append(field)
        }
        out.append(("X-Request-ID", requestID))
        return out
    }

    private static func isResponseDropped(_ name: String) -> Bool {
        let utf8 = name.utf8
        return responseDropped.contains { dropped in
            dropped.count == utf8.count && zip(dropped, utf8).allSatisfy { $0 == ($1 &- 0x41 < 26 ? $1 | 0x20 : $1) }
        }
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
