import HTTP1
import Testing

@testable import Proxy
@testable import Upstream

private func head(_ fields: [String]) -> HTTPRequestHead {
    let text = "GET /x HTTP/1.1\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"
    var parser = HTTPRequestHeadParser()
    let bytes = Array(text.utf8)
    guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
        fatalError("test head did not parse: \(text)")
    }
    return head
}

@Suite("HeaderPolicy")
struct HeaderPolicyTests {
    @Test("hop-by-hop fields, the proxy key and injected names are dropped; forwarding fields are added")
    func upstreamLines() {
        let request = head([
            "Host: app.local", "Connection: keep-alive, X-Hop", "X-Hop: 1", "Keep-Alive: timeout=5",
            "TE: trailers", "X-Proxy-Key: k", "Authorization: Bearer client", "Accept: */*",
            "Proxy-Authorization: Basic x", "X-Request-ID: theirs", "X-Forwarded-Proto: https",
        ])
        let lines = HeaderPolicy.upstreamLines(
            request, peer: "127.0.0.1", requestID: "r-1",
            removing: [Array("authorization".utf8)]
        ).lines
        #expect(
            lines == [
                "Accept: */*", "X-Forwarded-For: 127.0.0.1", "X-Forwarded-Proto: http",
                "X-Forwarded-Host: app.local", "Via: 1.1 platform-proxy", "X-Request-ID: r-1",
            ])
    }

    @Test("every hop-by-hop and framing name is dropped in any case, names that only look like them are kept")
    func hopByHopInAnyCase() {
        let request = head([
            "Host: h", "TRAILER: x", "upgrade: h2c", "Proxy-Connection: keep-alive", "te: trailers",
            "KEEP-ALIVE: 5", "Content-Length: 0", "Trailers: kept", "Upgradx: kept", "Connectiox: kept",
        ])
        let lines = HeaderPolicy.upstreamLines(request, peer: "p", requestID: "r", removing: []).lines
        #expect(lines.prefix(3) == ["Trailers: kept", "Upgradx: kept", "Connectiox: kept"])
        #expect(lines.count == 3 + 5)
    }

    @Test("a name that is, with _ for -, one the proxy drops or sets is dropped; other names with _ are kept")
    func underscoreLookalikes() {
        let request = head([
            "Host: h", "X_Authorization: Bearer attacker", "Transfer_Encoding: chunked",
            "Content_Length: 50", "x_forwarded_for: 6.6.6.6", "X_Request_ID: theirs", "Proxy_Connection: x",
            "X_Proxy_Key: k", "Keep_Alive: 5", "My_Header: kept", "Content_Type: kept", "X_Accept: kept",
        ])
        let lines = HeaderPolicy.upstreamLines(
            request, peer: "127.0.0.1", requestID: "r-1",
            removing: [Array("x-authorization".utf8)]
        ).lines
        #expect(
            lines == [
                "My_Header: kept", "Content_Type: kept", "X_Accept: kept", "X-Forwarded-For: 127.0.0.1",
                "X-Forwarded-Proto: http", "X-Forwarded-Host: h", "Via: 1.1 platform-proxy", "X-Request-ID: r-1",
            ])
    }

    @Test(
        "the lines say whether they carry Accept and Content-Type, as a scan of them would",
        arguments: [
            ["Host: h"], ["Host: h", "accept: */*"], ["Host: h", "Content-Type: text/plain"],
            ["Host: h", "ACCEPT: a", "content-type: b"], ["Host: h", "Accept:"], ["Host: h", "X-Accept: a"],
            ["Host: h", "Accept: a", "Authorization: Bearer x"],
        ])
    func suppliedFields(fields: [String]) {
        var supplies: SuppliedFields?
        let lines = HeaderPolicy.upstreamLines(
            head(fields), peer: "p", requestID: "r", removing: [], supplies: &supplies)
        let scanned = lines.containsNames("accept", "content-type")
        #expect(supplies == SuppliedFields(accept: scanned.0, contentType: scanned.1))
    }

    @Test("a field the route injects under the name Accept replaces the client's, and is not counted")
    func injectedAccept() {
        var supplies: SuppliedFields?
        let lines = HeaderPolicy.upstreamLines(
            head(["Host: h", "Accept: a"]), peer: "p", requestID: "r",
            removing: [Array("accept".utf8)], supplies: &supplies)
        #expect(!lines.lines.contains("Accept: a"))
        #expect(supplies == SuppliedFields(accept: false, contentType: false))
    }

    @Test("fields a Connection header lists are removed, and what the lines carry is then left unknown")
    func connectionListedUnknown() {
        var supplies: SuppliedFields?
        let lines = HeaderPolicy.upstreamLines(
            head(["Host: h", "Connection: accept", "Accept: a"]), peer: "p", requestID: "r",
            removing: [], supplies: &supplies)
        #expect(!lines.containsName("accept"))
        #expect(supplies == nil)
    }

    @Test("a Connection field cannot drop the proxy's own forwarding fields: only the client's lines it lists go")
    func connectionListsOurFields() {
        let request = head([
            "Host: app.local",
            "Connection: x-forwarded-for, via, x-request-id, x-forwarded-host, x-forwarded-proto, x-hop",
            "X-Hop: 1", "X-Forwarded-For: 10.0.0.1", "Via: 1.0 edge", "X-Kept: yes",
        ])
        let lines = HeaderPolicy.upstreamLines(request, peer: "127.0.0.1", requestID: "r-2", removing: []).lines
        #expect(
            lines == [
                "X-Kept: yes", "X-Forwarded-For: 10.0.0.1, 127.0.0.1", "X-Forwarded-Proto: http",
                "X-Forwarded-Host: app.local", "Via: 1.0 edge, 1.1 platform-proxy", "X-Request-ID: r-2",
            ])
    }

    @Test("X-Forwarded-For and Via split over several lines keep every entry, in order; empty lines add none")
    func chainsOverSeveralLines() {
        let request = head([
            "Host: h", "X-Forwarded-For: 10.0.0.1", "Via: 1.0 a", "X-Forwarded-For: 10.0.0.2, 10.0.0.3",
            "X-Forwarded-For:", "Via: 1.1 b",
        ])
        let lines = HeaderPolicy.upstreamLines(request, peer: "127.0.0.1", requestID: "r", removing: []).lines
        #expect(
            lines == [
                "X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, 127.0.0.1", "X-Forwarded-Proto: http",
                "X-Forwarded-Host: h", "Via: 1.0 a, 1.1 b, 1.1 platform-proxy", "X-Request-ID: r",
            ])
    }

    @Test(
        "the lines never outgrow the head plus the peer, the request ID and 256 bytes (the stack buffer they are written in)",
        arguments: [0, 1, 2, 3])
    func linesFitTheirBound(rotation: Int) {
        // Heads made of the fields that grow the lines most against their own size: empty values
        // (`Name;`), forwarding chains, a long Host; few and many of them, in rotated orders.
        let kinds = ["X-E:", "X-Forwarded-For: 1.2.3.4", "Via: 1.1 a", "X-A: b", "Accept:", "Content-Type:"]
        for hostLength in [1, 60, 200] {
            for count in [0, 1, 7, 40] {
                for (peerLength, idLength) in [(0, 1), (9, 16), (45, 128)] {
                    let fields =
                        ["Host: " + String(repeating: "h", count: hostLength)]
                        + (0..<count).map { kinds[($0 * (rotation + 1) + rotation) % kinds.count] }
                    let request = head(fields)
                    let peer = String(repeating: "9", count: peerLength)
                    let requestID = String(repeating: "r", count: idLength)
                    var bytes: [UInt8] = []
                    var indexes: [Int] = []
                    _ = HeaderPolicy.writeUpstreamLines(
                        request, peer: peer, requestID: requestID, removing: [],
                        connectionIndexes: &indexes, to: &bytes)
                    #expect(bytes.count <= request.storage.count + peer.utf8.count + requestID.utf8.count + 256)
                    #expect(
                        HeaderPolicy.upstreamLines(request, peer: peer, requestID: requestID, removing: []).bytes
                            == bytes)
                }
            }
        }
    }

    @Test("a bounded writer that runs out drops the write and says so, keeping what fitted")
    func boundedWriterOverflow() {
        var storage = [UInt8](repeating: 0, count: 5)
        storage.withUnsafeMutableBufferPointer { buffer in
            var out = BoundedWriter(buffer)
            out.write(StaticBytes("abc"))
            #expect(!out.overflowed)
            out.write(StaticBytes("def"))
            #expect(out.overflowed)
            out.write(StaticBytes("gh"))
            #expect(Array(out.written) == Array("abcgh".utf8))
        }
    }

    @Test("an existing X-Forwarded-For and Via are extended, not replaced")
    func chainsExtended() {
        let request = head(["Host: h", "X-Forwarded-For: 10.0.0.1", "Via: 1.0 edge"])
        let lines = HeaderPolicy.upstreamLines(request, peer: "127.0.0.1", requestID: "r", removing: []).lines
        #expect(lines.contains("X-Forwarded-For: 10.0.0.1, 127.0.0.1"))
        #expect(lines.contains("Via: 1.0 edge, 1.1 platform-proxy"))
    }

    @Test("an empty field is sent empty (curl's `Name;` form), not dropped")
    func emptyValue() {
        let lines = HeaderPolicy.upstreamLines(head(["Host: h", "X-Empty:"]), peer: "p", requestID: "r", removing: [])
            .lines
        #expect(lines.first == "X-Empty;")
    }

    @Test("response: hop-by-hop, framing and the upstream's request ID are dropped; ours is added")
    func responseFields() {
        let upstream = UpstreamResponseHead(
            status: 200,
            headers: [
                ("Content-Type", "application/json"), ("Connection", "keep-alive"), ("Transfer-Encoding", "chunked"),
                ("content-length", "5"), ("X-Request-ID", "upstream"), ("Set-Cookie", "a=1"),
                ("KEEP-ALIVE", "timeout=5"),
            ])
        var bytes: [UInt8] = []
        var masker: EchoMasker?
        HeaderPolicy.appendResponseFields(upstream, requestID: "r-9", to: &bytes, masker: &masker)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "Content-Type: application/json\r\nSet-Cookie: a=1\r\nX-Request-ID: r-9\r\n")
    }
}

/// A response head read from wire lines, as the transfer reads libcurl's.
private func wireHead(_ lines: [String]) -> UpstreamResponseHead {
    var head = UpstreamResponseHead(status: 0)
    for line in ["HTTP/1.1 200 OK\r\n"] + lines + ["\r\n"] {
        _ = Array(line.utf8).withUnsafeBytes { head.read(line: $0) }
    }
    return head
}

@Suite("HeaderPolicy response fields from the wire")
struct WireResponseFieldTests {
    @Test("fields read from the wire are relayed as `Name: value`, however they were spaced")
    func normalisedSpacing() {
        let head = wireHead([
            "X-Plain: one\r\n", "X-Tight:two\r\n", "X-Wide: \t three  \r\n", "X-Colon: a: b\r\n",
            "X-Empty:\r\n", "Connection: keep-alive\r\n",
        ])
        var bytes: [UInt8] = []
        var masker: EchoMasker?
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "X-Plain: one\r\nX-Tight: two\r\nX-Wide: three\r\nX-Colon: a: b\r\nX-Empty: \r\nX-Request-ID: r\r\n")
    }

    @Test("with a masker, a value echoing the token is masked and the others pass as written")
    func maskedAmongPlain() {
        let token = Array("secret-token-123".utf8)
        let head = wireHead([
            "X-Echo: Bearer secret-token-123\r\n", "X-Plain: fine\r\n", "X-Tight:secret-token-123\r\n",
        ])
        var bytes: [UInt8] = []
        var masker = EchoMasker(token: token)
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "X-Echo: Bearer ****************\r\nX-Plain: fine\r\nX-Tight: ****************\r\nX-Request-ID: r\r\n"
        )
    }

    @Test("a field name echoing the token is masked too, in any case (frameworks re-case names), and stays a token")
    func maskedName() {
        let head = wireHead([
            "X-secret-token-123: 1\r\n", "X-Plain: fine\r\n", "X-Echo-Secret-Token-123: go\r\n",
            "x-echo-secret-token-123x-secret-token-123: h2\r\n",
        ])
        var bytes: [UInt8] = []
        var masker = EchoMasker(token: Array("secret-token-123".utf8))
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(
            String(decoding: bytes, as: UTF8.self) == "X-****************: 1\r\nX-Plain: fine\r\n"
                + "X-Echo-****************: go\r\nx-echo-****************x-****************: h2\r\nX-Request-ID: r\r\n")
        #expect(masker?.masked == 4)
    }

    @Test(
        "relayed fields keep their order around dropped, re-spaced and LF-ended ones; hop-by-hop names drop in any case"
    )
    func runsKeepOrder() {
        let head = wireHead([
            "A: 1\r\n", "B:2\n", "Content-Length: 5\r\n", "C: 3\r\n", "D: 4\n", "X-Request-Id: up\r\n",
            "E: 5  \r\n", "TE: x\r\n", "UPGRADE: h2c\r\n", "proxy-connection: close\r\n", "Trailer: T\r\n",
            "Trailers: kept\r\n", "Connectiox: kept\r\n", "F: 6\r\n",
        ])
        var bytes: [UInt8] = []
        var masker: EchoMasker?
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(
            String(decoding: bytes, as: UTF8.self) == "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n"
                + "Trailers: kept\r\nConnectiox: kept\r\nF: 6\r\nX-Request-ID: r\r\n")
    }

    @Test("a body relayed decoded drops its Content-Encoding (any case) and nothing else; identity is not an encoding")
    func decodedBodyDropsItsCoding() {
        let head = wireHead([
            "Content-Type: text/plain\r\n", "CONTENT-ENCODING: gzip\r\n", "Vary: Accept-Encoding\r\n",
            "Content-Length: 31\r\n",
        ])
        #expect(head.isContentEncoded)
        #expect(!wireHead(["Content-Encoding: Identity\r\n"]).isContentEncoded)
        #expect(!wireHead(["X-Content-Encoding: gzip\r\n"]).isContentEncoded)
        var bytes: [UInt8] = []
        var masker: EchoMasker?
        HeaderPolicy.appendResponseFields(
            head, requestID: "r", to: &bytes, masker: &masker, droppingContentEncoding: true)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "Content-Type: text/plain\r\nVary: Accept-Encoding\r\nX-Request-ID: r\r\n")
        bytes = []
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(String(decoding: bytes, as: UTF8.self).contains("CONTENT-ENCODING: gzip\r\n"))
    }

    @Test(
        "fields the upstream's Connection lists are not relayed (RFC 9110 §7.6.1), in any case, whatever else it lists")
    func connectionListedDropped() {
        let head = wireHead([
            "Connection: keep-alive, X-Hop , x-other\r\n", "X-Hop: no\r\n", "X-Other: no\r\n",
            "connection: close,,Keep-Alive\r\n", "X-Kept: yes\r\n", "Keep-Alive: timeout=5\r\n",
        ])
        var bytes: [UInt8] = []
        var masker: EchoMasker?
        HeaderPolicy.appendResponseFields(head, requestID: "r", to: &bytes, masker: &masker)
        #expect(String(decoding: bytes, as: UTF8.self) == "X-Kept: yes\r\nX-Request-ID: r\r\n")
    }
}

@Suite("UpstreamTarget")
struct UpstreamTargetTests {
    @Test(
        "dot segments are found plainly or percent-encoded, in any case",
        arguments: [
            ("/a/./b", true), ("/a/../b", true), ("/a/..", true), ("/.", true), ("/a/%2e/b", true),
            ("/a/%2E%2e/b", true), ("/a/.%2e", true), ("/a/.../b", false), ("/a/.b/c", false),
            ("/a/%2ex/b", false), ("/a/b.", false), ("/", false), ("//", false), ("/a/%2", false), ("/a/%2e%2", false),
        ])
    func dotSegments(path: String, expected: Bool) {
        #expect(UpstreamTarget.hasDotSegment(Substring(path)) == expected)
    }
}
