import HTTP1
import Upstream

/// Which headers cross the proxy, in each direction (README "Behaviour worth knowing", Headers).
enum HeaderPolicy {
    /// What the policy does with a request field (`accept` and `contentType` are kept, and noted).
    private enum Action { case drop, forwardedFor, via, host, connection, keep, accept, contentType }

    /// Hop-by-hop fields (RFC 9110 §7.6.1), the framing fields curl sets itself, the proxy's own
    /// key, and the fields the proxy sets: by length (the array index), then bytes, so no String
    /// and no hashing per field.
    private static let table: [[(StaticBytes, Action)]] = {
        let entries: [(StaticString, Action)] = [
            ("connection", .connection), ("keep-alive", .drop), ("proxy-connection", .drop), ("te", .drop),
            ("trailer", .drop), ("transfer-encoding", .drop), ("upgrade", .drop), ("proxy-authorization", .drop),
            ("host", .host), ("content-length", .drop), ("expect", .drop), ("x-proxy-key", .drop),
            ("x-forwarded-for", .forwardedFor), ("x-forwarded-proto", .drop), ("x-forwarded-host", .drop),
            ("via", .via), ("x-request-id", .drop), ("accept", .accept), ("content-type", .contentType),
        ]
        return byLength(entries.map { (StaticBytes($0.0), $0.1) }, name: \.0)
    }()

    /// Hop-by-hop fields not relayed from an upstream response; the framing is ours. By length.
    private static let responseDropped: [[StaticBytes]] = byLength(([
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "x-request-id",
    ] as [StaticString]).map(StaticBytes.init), name: \.self)

    /// `entries` grouped by the length of their name: entry `n` holds those `n` bytes long.
    private static func byLength<Entry>(_ entries: [Entry], name: (Entry) -> StaticBytes) -> [[Entry]] {
        var table = [[Entry]](repeating: [], count: (entries.map { name($0).count }.max() ?? 0) + 1)
        for entry in entries { table[name(entry).count].append(entry) }
        return table
    }

    /// The upstream request's header lines: the client's minus hop-by-hop fields, minus any in
    /// `removing` (lowercased credential header names about to be injected), plus the forwarding
    /// fields. Built from the head's bytes: no String per field.
    static func upstreamLines(_ head: HTTPRequestHead, peer: String, requestID: String, removing: [[UInt8]]) -> HeaderLines {
        var supplies: SuppliedFields?
        return upstreamLines(head, peer: peer, requestID: requestID, removing: removing, supplies: &supplies)
    }

    /// `upstreamLines`, also saying whether they hold an `Accept` and a `Content-Type` (nil when a
    /// `Connection` list removed fields by name and it is not known), so the transfer need not
    /// scan the lines for them.
    static func upstreamLines(_ head: HTTPRequestHead, peer: String, requestID: String, removing: [[UInt8]],
                              supplies: inout SuppliedFields?) -> HeaderLines {
        var found = SuppliedFields(accept: false, contentType: false)
        var lines = HeaderLines()
        lines.reserveCapacity(head.storage.count + peer.utf8.count + requestID.utf8.count + 128)
        var forwardedFor: Range<Int>?
        var via: Range<Int>?
        var host: Range<Int>?
        var connectionIndexes: [Int] = []
        let bytes = head.storage
        for i in 0..<head.fieldCount {
            let field = head.fields[i]
            let length = field.name.count
            var action = Action.keep
            if length < table.count, let hit = table[length].first(where: { head.nameEquals(i, $0.0) }) {
                action = hit.1
            }
            if action == .keep || action == .accept || action == .contentType,
               removing.contains(where: { $0.count == length && head.nameEquals(i, $0) }) {
                action = .drop
            }
            switch action {
            case .drop: continue
            case .forwardedFor: forwardedFor = field.value
            case .via: via = field.value
            case .host: host = field.value
            case .connection: connectionIndexes.append(i)
            case .keep, .accept, .contentType:
                if action == .accept { found.accept = true }
                if action == .contentType { found.contentType = true }
                // curl drops `Name:` with an empty value; `Name;` sends it empty.
                if field.value.isEmpty {
                    lines.appendPart(bytes[field.name])
                    lines.appendPart(CollectionOfOne(UInt8(ascii: ";")))
                    lines.endLine()
                } else {
                    lines.appendPart(bytes[field.name.lowerBound..<field.value.upperBound])
                    lines.endLine()
                }
            }
        }
        supplies = found
        if !connectionIndexes.isEmpty {
            lines = removingConnectionListed(head, connectionIndexes, from: lines)
            supplies = nil
        }
        appendChain(Fixed.forwardedFor, earlier: forwardedFor.map { bytes[$0] }, ours: peer.utf8, to: &lines)
        lines.appendPart(Fixed.forwardedProto)
        lines.endLine()
        if let host, !host.isEmpty { lines.append(name: Fixed.forwardedHost, value: bytes[host]) }
        appendChain(Fixed.via, earlier: via.map { bytes[$0] }, ours: Fixed.viaSelf, to: &lines)
        lines.append(name: Fixed.requestID, value: requestID.utf8)
        return lines
    }

    /// `prefix` + the earlier hops' value and ", " (when there was one) + ours: X-Forwarded-For
    /// and Via grow by one entry per proxy.
    private static func appendChain(_ prefix: StaticBytes, earlier: ArraySlice<UInt8>?, ours: some Collection<UInt8>,
                                    to lines: inout HeaderLines) {
        lines.appendPart(prefix)
        if let earlier {
            lines.appendPart(earlier)
            lines.appendPart(Fixed.commaSpace)
        }
        lines.appendPart(ours)
        lines.endLine()
    }

    private enum Fixed {
        static let forwardedFor = StaticBytes("X-Forwarded-For: ")
        static let forwardedProto = StaticBytes("X-Forwarded-Proto: http")
        static let forwardedHost = StaticBytes("X-Forwarded-Host")
        static let via = StaticBytes("Via: ")
        static let viaSelf = StaticBytes("1.1 platform-proxy")
        static let requestID = StaticBytes("X-Request-ID")
        static let commaSpace = StaticBytes(", ")
        static let colonSpace = StaticBytes(": ")
        static let crlf = StaticBytes("\r\n")
        static let requestIDColon = StaticBytes("X-Request-ID: ")
    }

    /// Drops the fields a Connection header lists (other than the usual close / keep-alive).
    private static func removingConnectionListed(_ head: HTTPRequestHead, _ indexes: [Int], from lines: HeaderLines) -> HeaderLines {
        var listed: Set<String> = []
        for i in indexes {
            for token in head.value(at: i).split(separator: ",") {
                let name = token.trimmingCharacters().lowercased()
                if name != "close" && name != "keep-alive" && !name.isEmpty { listed.insert(name) }
            }
        }
        return listed.isEmpty ? lines : lines.removing(listed)
    }

    /// Appends the response fields relayed to the client, `Name: value\r\n` each, and the request
    /// ID. The transfer already dropped fields holding CR, LF or NUL. With a `masker`, values
    /// echoing the injected token are relayed with it masked.
    static func appendResponseFields<Sink: ByteSink>(_ head: UpstreamResponseHead, requestID: String, to out: inout Sink,
                                                     masker: inout EchoMasker?) {
        let dropped = responseDropped
        let storage = head.storage
        // A value shorter than the token cannot hold it: most values skip the masker.
        let shortest = masker?.token.count ?? Int.max
        out.reserve(storage.count + 4 * head.fields.count + requestID.utf8.count + 16)
        storage.withUnsafeBufferPointer { bytes in
            for field in head.fields {
                let name = UnsafeBufferPointer(rebasing: bytes[field.name])
                if name.count < dropped.count, dropped[name.count].contains(where: { asciiEqualsLowercased(name, $0.buffer) }) { continue }
                let masked = field.value.count >= shortest ? masker?.masking(storage[field.value]) : nil
                if masked == nil && field.value.lowerBound == field.name.upperBound + 2
                    && bytes[field.name.upperBound] == UInt8(ascii: ":") && bytes[field.name.upperBound + 1] == UInt8(ascii: " ") {
                    // `Name: value` as received: one copy.
                    out.write(UnsafeBufferPointer(rebasing: bytes[field.name.lowerBound..<field.value.upperBound]))
                } else {
                    out.write(name)
                    out.write(Fixed.colonSpace)
                    if let masked {
                        masked.withUnsafeBytes { out.write($0) }
                    } else {
                        out.write(UnsafeBufferPointer(rebasing: bytes[field.value]))
                    }
                }
                out.write(Fixed.crlf)
            }
        }
        out.write(Fixed.requestIDColon)
        out.write(requestID)
        out.write(Fixed.crlf)
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
