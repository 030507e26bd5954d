import HTTP1
import Testing

@testable import Proxy

private func head(_ fields: [String], version: String = "1.1") -> HTTPRequestHead {
    let text = "GET /ws HTTP/\(version)\r\nHost: app.local\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"
    var parser = HTTPRequestHeadParser()
    let bytes = Array(text.utf8)
    guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
        fatalError("test head did not parse: \(text)")
    }
    return head
}

@Suite("ProxyHandler.requestedUpgrade")
struct RequestedUpgradeTests {
    @Test(
        "the first protocol asked for, offered alone; `upgrade` found in any Connection field",
        arguments: [
            (["Connection: Upgrade", "Upgrade: websocket"], "websocket", "websocket"),
            (["Connection: keep-alive, UPGRADE", "Upgrade:  WebSocket/13 "], "websocket", "WebSocket/13"),
            (["Connection: Upgrade", "Upgrade: websocket, h2c"], "websocket", "websocket"),
            (["Connection: Upgrade", "Upgrade: , my-proto/2 , websocket"], "my-proto", "my-proto/2"),
            (["Connection: keep-alive", "Connection: Upgrade", "Upgrade: websocket"], "websocket", "websocket"),
            (["Upgrade: websocket", "Connection: close", "connection: upgrade"], "websocket", "websocket"),
        ])
    func asked(fields: [String], token: String, value: String) {
        let upgrade = ProxyHandler.requestedUpgrade(head(fields))
        #expect(upgrade?.token == token)
        #expect(upgrade?.value == value)
    }

    @Test(
        "no upgrade without both fields, or with no protocol named",
        arguments: [
            ["Upgrade: websocket"],
            ["Connection: keep-alive", "Upgrade: websocket"],
            ["Connection: Upgrade"],
            ["Connection: Upgrade", "Upgrade: ,"],
            ["Connection: Upgrade", "Upgrade: /13"],
            ["Connection: upgraded", "Upgrade: websocket"],
        ])
    func notAsked(fields: [String]) {
        #expect(ProxyHandler.requestedUpgrade(head(fields)) == nil)
    }

    @Test("a route tunnels an upgrade it lists, asked for without a body, in HTTP/1.1 only")
    func tunnelled() {
        let asking = ["Connection: Upgrade", "Upgrade: websocket"]
        #expect(ProxyHandler.tunnelledUpgrade(head(asking), upgrades: ["websocket"])?.token == "websocket")
        #expect(ProxyHandler.tunnelledUpgrade(head(asking), upgrades: ["my-proto"]) == nil)
        #expect(ProxyHandler.tunnelledUpgrade(head(asking + ["Content-Length: 1"]), upgrades: ["websocket"]) == nil)
        #expect(ProxyHandler.tunnelledUpgrade(head(asking, version: "1.0"), upgrades: ["websocket"]) == nil)
    }
}
