import Glibc
import HTTP1
import Upstream

/// Which headers cross the proxy, in each direction (docs/forwarding.md, "Headers").
enum HeaderPolicy {
    /// What the policy does with a request field (`accept` and `contentType` are kept, and noted).
    private enum Action { case drop, forwardedFor, via, host, connection, keep, accept, contentType }

    /// The end-to-end fields the policy acts on (hop-by-hop and framing fields are `FieldRole`'s):
    /// the proxy's own key, credentials for a proxy, curl's `Expect`, and the fields the proxy
    /// sets; by length (the array index), then bytes, so no String and no hashing per field.
    private static let table: [[(StaticBytes, Action)]] = {
        let entries: [(StaticString, Action)] = [
            ("proxy-authorization", .drop), ("host", .host), ("expect", .drop), ("x-proxy-key", .drop),
            ("x-forwarded-for", .forwardedFor), ("x-forwarded-proto", .drop), ("x-forwarded-host", .drop),
            ("via", .via), ("x-request-id", .drop), ("accept", .accept), ("content-type", .contentType),
        ]
        return byLength(entries.map { (StaticBytes($0.0), $0.1) }, name: \.0)
    }()

    /// Whether `name` is, with `_` read as `-`, a field the proxy drops or sets itself
    /// (`X_Authorization`, `Transfer_Encoding`, `X_Forwarded_For`): CGI and WSGI upstreams read
    /// `_` and `-` alike (`HTTP_X_AUTHORIZATION`), so the client's value would reach them beside
    /// or instead of the proxy's (nginx drops every name with `_` for the same reason).
    private static func isUnderscoreLookalike(_ name: UnsafeBufferPointer<UInt8>, removing: [[UInt8]]) -> Bool {
        guard name.count <= 256, let base = name.baseAddress, memchr(base, Int32(UInt8(ascii: "_")), name.count) != nil
        else {
            return false
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: name.count) { buffer in
            for (i, b) in name.enumerated() { buffer[i] = b == UInt8(ascii: "_") ? UInt8(ascii: "-") : b }
            let dashed = UnsafeBufferPointer(buffer)
            if FieldRole(name: dashed) != .endToEnd { return true }
            if dashed.count < table.count,
                table[dashed.count].contains(where: {
                    $0.1 != .accept && $0.1 != .contentType && asciiEqualsLowercased(dashed, $0.0.buffer)
                })
            {
                return true
            }
            return removing.contains { dropped in
                dropped.count == dashed.count && dropped.withUnsafeBufferPointer { asciiEqualsLowercased(dashed, $0) }
            }
        }
    }

    /// `entries` grouped by the length of their name: entry `n` holds those `n` bytes long.
    private static func byLength<Entry>(_ entries: [Entry], name: (Entry) -> StaticBytes) -> [[Entry]] {
        var table = [[Entry]](repeating: [], count: (entries.map { name($0).count }.max() ?? 0) + 1)
        for entry in entries { table[name(entry).count].append(entry) }
        return table
    }

    /// The upstream request's header lines: the client's minus hop-by-hop fields, minus any in
    /// `removing` (lowercased credential header names about to be injected), plus the forwarding
    /// fields. Built from the head's bytes: no String per field.
    static func upstreamLines(_ head: HTTPRequestHead, peer: String, requestID: String, removing: [[UInt8]])
        -> HeaderLines
    {
        var supplies: SuppliedFields?
        return upstreamLines(head, peer: peer, requestID: requestID, removing: removing, supplies: &supplies)
    }

    /// `upstreamLines`, also saying whether they hold an `Accept` and a `Content-Type` (nil when a
    /// `Connection` list removed fields by name and it is not known), so the transfer need not
    /// scan the lines for them.
    static func upstreamLines(
        _ head: HTTPRequestHead, peer: String, requestID: String, removing: [[UInt8]],
        supplies: inout SuppliedFields?
    ) -> HeaderLines {
        // Written into a buffer on the stack (or a temporary one for a large head), then copied
        // into the lines' array once: ~25 writes of a few bytes, each an `Array` append otherwise.
        // A kept line is never longer than it was in the head (NUL for CRLF, `;` for `:`), the
        // values the forwarding fields repeat come from fields that were dropped, so the head's
        // size plus ours bounds them all; were it ever short, they are built again in an array.
        let bound = head.storage.count + peer.utf8.count + requestID.utf8.count + 256
        var connectionIndexes: [Int] = []
        var written: (found: SuppliedFields, clientBytes: Int)?
        let lines =
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bound) { buffer -> HeaderLines? in
                var out = BoundedWriter(buffer)
                written = writeUpstreamLines(
                    head, peer: peer, requestID: requestID, removing: removing,
                    connectionIndexes: &connectionIndexes, to: &out)
                return out.overflowed ? nil : HeaderLines(bytes: out.written)
            }
            ?? {
                var bytes: [UInt8] = []
                connectionIndexes.removeAll()
                written = writeUpstreamLines(
                    head, peer: peer, requestID: requestID, removing: removing,
                    connectionIndexes: &connectionIndexes, to: &bytes)
                return HeaderLines(bytes: bytes)
            }()
        guard let written else { return lines }
        supplies = written.found
        guard !connectionIndexes.isEmpty else { return lines }
        // Only the client's own lines are dropped by what its Connection fields list: ours stay.
        supplies = nil
        let client = HeaderLines(bytes: Array(lines.bytes[..<written.clientBytes]))
        var kept = removingConnectionListed(head, connectionIndexes, from: client)
        kept.append(contentsOf: HeaderLines(bytes: Array(lines.bytes[written.clientBytes...])))
        return kept
    }

    /// Writes `upstreamLines`' lines (each ending in a NUL, as `HeaderLines` holds them): the
    /// client's, then ours. Says whether the client's hold an `Accept` and a `Content-Type`, and
    /// how many bytes they took; the `Connection` fields' indexes are collected, for the caller to
    /// drop what they list from the client's lines.
    static func writeUpstreamLines<Sink: ByteSink>(
        _ head: HTTPRequestHead, peer: String, requestID: String,
        removing: [[UInt8]], connectionIndexes: inout [Int],
        to out: inout Sink
    ) -> (found: SuppliedFields, clientBytes: Int) {
        var found = SuppliedFields(accept: false, contentType: false)
        let start = out.count
        var clientBytes = 0
        // Every line of each, in order: a client may split a list over several (RFC 9110 §5.3).
        // Empty arrays allocate nothing; most requests have neither.
        var forwardedFor: [Range<Int>] = []
        var via: [Range<Int>] = []
        var host: Range<Int>?
        head.storage.withUnsafeBufferPointer { bytes in
            for i in 0..<head.fieldCount {
                let field = head.fields[i]
                let length = field.name.count
                var action = Action.keep
                switch FieldRole(name: UnsafeBufferPointer(rebasing: bytes[field.name])) {
                case .connection: action = .connection
                // Hop-by-hop, and the framing curl sets itself.
                case .hopByHop, .transferEncoding, .contentLength: action = .drop
                case .endToEnd:
                    if length < table.count, let hit = table[length].first(where: { head.nameEquals(i, $0.0) }) {
                        action = hit.1
                    }
                }
                if action == .keep || action == .accept || action == .contentType {
                    if removing.contains(where: { $0.count == length && head.nameEquals(i, $0) }) {
                        action = .drop
                    } else if isUnderscoreLookalike(
                        UnsafeBufferPointer(rebasing: bytes[field.name]), removing: removing)
                    {
                        action = .drop
                    }
                }
                switch action {
                case .drop: continue
                case .forwardedFor: forwardedFor.append(field.value)
                case .via: via.append(field.value)
                case .host: host = field.value
                case .connection: connectionIndexes.append(i)
                case .keep, .accept, .contentType:
                    if action == .accept { found.accept = true }
                    if action == .contentType { found.contentType = true }
                    // curl drops `Name:` with an empty value; `Name;` sends it empty.
                    if field.value.isEmpty {
                        out.write(UnsafeBufferPointer(rebasing: bytes[field.name]))
                        out.write(byte: UInt8(ascii: ";"))
                    } else {
                        out.write(UnsafeBufferPointer(rebasing: bytes[field.name.lowerBound..<field.value.upperBound]))
                    }
                    out.write(byte: 0)
                }
            }
            // Only the client's lines were written so far.
            clientBytes = out.count - start
            writeChainStart(Fixed.forwardedFor, earlier: forwardedFor, in: bytes, to: &out)
            out.write(peer)
            out.write(byte: 0)
            out.write(Fixed.forwardedProto)
            out.write(byte: 0)
            if let host, !host.isEmpty {
                out.write(Fixed.forwardedHost)
                out.write(HTTPFieldSyntax.colonSpace)
                out.write(UnsafeBufferPointer(rebasing: bytes[host]))
                out.write(byte: 0)
            }
            writeChainStart(Fixed.via, earlier: via, in: bytes, to: &out)
            out.write(Fixed.viaSelf)
            out.write(byte: 0)
        }
        out.write(Fixed.requestIDColon)
        out.write(requestID)
        out.write(byte: 0)
        return (found, clientBytes)
    }

    /// `prefix` + the earlier hops' values, each followed by ", " (empty lines skipped): X-Forwarded-For
    /// and Via grow by one entry per proxy, ours written next.
    private static func writeChainStart<Sink: ByteSink>(
        _ prefix: StaticBytes, earlier: [Range<Int>],
        in bytes: UnsafeBufferPointer<UInt8>, to out: inout Sink
    ) {
        out.write(prefix)
        for value in earlier where !value.isEmpty {
            out.write(UnsafeBufferPointer(rebasing: bytes[value]))
            out.write(Fixed.commaSpace)
        }
    }

    private enum Fixed {
        static let forwardedFor = StaticBytes("X-Forwarded-For: ")
        static let forwardedProto = StaticBytes("X-Forwarded-Proto: http")
        static let forwardedHost = StaticBytes("X-Forwarded-Host")
        static let via = StaticBytes("Via: ")
        static let viaSelf = StaticBytes("1.1 platform-proxy")
        static let commaSpace = StaticBytes(", ")
        static let requestIDColon = StaticBytes("X-Request-ID: ")
        static let requestIDLower = StaticBytes("x-request-id")
    }

    /// Drops the fields a Connection header lists (other than the usual close / keep-alive).
    private static func removingConnectionListed(_ head: HTTPRequestHead, _ indexes: [Int], from lines: HeaderLines)
        -> HeaderLines
    {
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
    /// ID. The transfer already dropped fields holding CR, LF or NUL. Hop-by-hop fields and the
    /// framing are not relayed (the head told them apart as they arrived), nor the upstream's
    /// `X-Request-ID` (the proxy sends its own) or the fields the upstream's `Connection` names
    /// (RFC 9110 §7.6.1). With a `masker`, names and values echoing the injected token are relayed
    /// with it masked (`*` is a token character: a masked name is still a name). Fields stored
    /// as relayed, one after another, are written in one copy. `droppingContentEncoding`: the body
    /// is relayed decoded (`UpstreamRequest.decodesContent`), so its `Content-Encoding` is not.
    static func appendResponseFields<Sink: ByteSink>(
        _ head: UpstreamResponseHead, requestID: String, to out: inout Sink,
        masker: inout EchoMasker?, droppingContentEncoding: Bool = false
    ) {
        let storage = head.storage
        // A value shorter than the token cannot hold it: most values skip the masker.
        let shortest = masker?.token.count ?? Int.max
        out.reserve(storage.count + 4 * head.fields.count + requestID.utf8.count + 16)
        storage.withUnsafeBufferPointer { bytes in
            let listed = head.connectionNames
            // Bytes of `storage` relayed as they are, not yet written.
            var run = 0..<0
            for field in head.fields where field.kind == .endToEnd {
                let name = UnsafeBufferPointer(rebasing: bytes[field.name])
                if name.count == Fixed.requestIDLower.count && asciiEqualsLowercased(name, Fixed.requestIDLower.buffer)
                {
                    continue
                }
                if droppingContentEncoding
                    && asciiEqualsLowercased(name, UpstreamResponseHead.contentEncodingName.buffer)
                {
                    continue
                }
                if !listed.isEmpty,
                    listed.contains(where: { $0.withUnsafeBufferPointer { asciiEqualsLowercased(name, $0) } })
                {
                    continue
                }
                let masked = field.value.count >= shortest ? masker?.masking(storage[field.value]) : nil
                let maskedName = field.name.count >= shortest ? masker?.maskingIgnoringCase(storage[field.name]) : nil
                if masked == nil && maskedName == nil && field.isCanonical {
                    if run.upperBound == field.line.lowerBound && !run.isEmpty {
                        run = run.lowerBound..<field.line.upperBound
                    } else {
                        if !run.isEmpty { out.write(UnsafeBufferPointer(rebasing: bytes[run])) }
                        run = field.line
                    }
                    continue
                }
                if !run.isEmpty { out.write(UnsafeBufferPointer(rebasing: bytes[run])) }
                run = 0..<0
                if let maskedName {
                    maskedName.withUnsafeBytes { out.write($0) }
                } else {
                    out.write(name)
                }
                out.write(HTTPFieldSyntax.colonSpace)
                if let masked {
                    masked.withUnsafeBytes { out.write($0) }
                } else {
                    out.write(UnsafeBufferPointer(rebasing: bytes[field.value]))
                }
                out.write(HTTPFieldSyntax.crlf)
            }
            if !run.isEmpty { out.write(UnsafeBufferPointer(rebasing: bytes[run])) }
        }
        out.write(Fixed.requestIDColon)
        out.write(requestID)
        out.write(HTTPFieldSyntax.crlf)
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
