import Testing

@testable import Credentials

@Suite("Credential snapshots")
struct CredentialSnapshotTests {
    @Test("header values are formatted once as '<type> <token>'")
    func values() {
        let snapshot = CredentialSnapshot(
            generation: 3, accessToken: "abc.def-ghi_~+/=", idToken: "eyJ.x.y", tokenType: "Bearer")
        #expect(snapshot.value(for: .accessToken) == "Bearer abc.def-ghi_~+/=")
        #expect(snapshot.value(for: .jwt) == "Bearer eyJ.x.y")
        #expect(snapshot.value(for: .none) == nil)
    }

    @Test(
        "a token holding anything but visible ASCII is never sent",
        arguments: ["a\u{0}b", "a\r\nX-Evil: 1", "a b", "tab\there", "caf\u{E9}", "del\u{7F}"])
    func unsafeTokens(token: String) {
        let snapshot = CredentialSnapshot(generation: 1, accessToken: token, idToken: token, tokenType: "Bearer")
        #expect(snapshot.value(for: .accessToken) == nil)
        #expect(snapshot.value(for: .jwt) == nil)
    }

    @Test("an unsafe or empty token type makes both values unusable", arguments: ["Bea rer", "Bearer\r\n", ""])
    func unsafeType(type: String) {
        let snapshot = CredentialSnapshot(generation: 1, accessToken: "t", idToken: "i", tokenType: type)
        #expect(snapshot.value(for: .accessToken) == nil)
        #expect(snapshot.value(for: .jwt) == nil)
    }
}
