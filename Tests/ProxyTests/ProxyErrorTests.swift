import JSON
import Testing

@testable import Proxy

/// Parses an error body and returns its three members (nil for a missing or non-string one).
private func members(_ body: [UInt8]) throws -> (error: String?, message: String?, requestID: String?, count: Int) {
    let value = try JSONValue.parse(body)
    let object = try #require(value.objectValue)
    return (
        object["error"]?.stringValue, object["message"]?.stringValue, object["requestID"]?.stringValue, object.count
    )
}

@Suite("ProxyError")
struct ProxyErrorTests {
    @Test(
        "the body is a JSON object with error, message and requestID",
        arguments: [
            ProxyError.noRoute("/x"), .hostNotAllowed, .originNotAllowed, .proxyKeyRequired, .mockNotFound("/m/x.json"),
            .mockUnreadable("/m/x.json"), .invalidPath, .methodNotAllowed("GET"), .upstreamUnreachable,
            .upstreamTimeout, .tooManyRedirects, .bodyTooLarge, .invalidRequest("nope"),
        ])
    func bodyIsJSON(error: ProxyError) throws {
        let parsed = try members(error.body(requestID: "abc-0-1"))
        #expect(parsed.error == error.errorCode)
        #expect(parsed.message == error.message)
        #expect(parsed.requestID == "abc-0-1")
        #expect(parsed.count == 3)
    }

    @Test("quotes, backslashes and control characters in the message and id are escaped")
    func escaping() throws {
        let message = "bad \"target\" \\ here\n\ttab \u{1} é"
        let id = "id\"with\\quote"
        let parsed = try members(ProxyError.invalidRequest(message).body(requestID: id))
        #expect(parsed.message == message)
        #expect(parsed.requestID == id)
    }

    @Test("a path with quotes in noRoute stays inside its string")
    func noRouteWithQuotes() throws {
        let parsed = try members(ProxyError.noRoute("/a\",\"error\":\"pwned").body(requestID: "r"))
        #expect(parsed.error == "no_route")
        #expect(parsed.message == "No route matches /a\",\"error\":\"pwned.")
    }

    @Test("codes are snake_case and statuses match")
    func codesAndStatuses() {
        #expect(ProxyError.noRoute("/").status == 404)
        #expect(ProxyError.noRoute("/").errorCode == "no_route")
        #expect(ProxyError.hostNotAllowed.status == 403)
        #expect(ProxyError.proxyKeyRequired.status == 401)
        #expect(ProxyError.mockUnreadable("f").status == 500)
        #expect(ProxyError.invalidPath.status == 400)
        #expect(ProxyError.methodNotAllowed("GET").status == 405)
        #expect(ProxyError.upstreamUnreachable.status == 502)
        #expect(ProxyError.upstreamTimeout.status == 504)
        #expect(ProxyError.bodyTooLarge.status == 413)
        #expect(ProxyError.bodyTooLarge.errorCode == "body_too_large")
    }

    @Test("errors are equatable by code, status and message")
    func equatable() {
        #expect(ProxyError.noRoute("/a") == .noRoute("/a"))
        #expect(ProxyError.noRoute("/a") != .noRoute("/b"))
        #expect(ProxyError.invalidRequest("x") != .invalidRequest("y"))
    }

    @Test("the gate names the login URL, and with several providers the provider too")
    func gateNamesProviderLogin() throws {
        let single = try #require(JSONValue.parse(ProxyError.awaitingAuthorization.body(requestID: "r")).objectValue)
        #expect(single["login"]?.stringValue == "/_platform/login")
        #expect(single["provider"] == nil)
        let named = try #require(
            JSONValue.parse(ProxyError.awaitingAuthorization(provider: "ping").body(requestID: "r")).objectValue)
        #expect(named["error"]?.stringValue == "awaiting_authorization")
        #expect(named["login"]?.stringValue == "/_platform/login?provider=ping")
        #expect(named["provider"]?.stringValue == "ping")
        #expect(ProxyError.awaitingAuthorization(provider: "ping").status == 401)
    }

    @Test("an unknown provider is a 404 naming it and the configured ones")
    func unknownProviderNamesIt() throws {
        let error = ProxyError.unknownProvider("nope", known: ["platform", "ping"])
        #expect(error.status == 404 && error.errorCode == "unknown_provider")
        #expect(error.message == "No provider is named nope (configured: platform, ping).")
        let body = try #require(JSONValue.parse(error.body(requestID: "r")).objectValue)
        #expect(body["provider"]?.stringValue == "nope")
    }
}
