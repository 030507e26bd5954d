import Testing

@testable import Credentials

@Suite struct SecretRedactionTests {
    @Test(
        "every occurrence of every secret is taken out, the rest kept",
        arguments: [
            (
                "invalid_grant: subject_token abc123 is expired", ["abc123"],
                "invalid_grant: subject_token [redacted] is expired"
            ),
            ("abc abc", ["abc"], "[redacted] [redacted]"),
            ("a secret s3 and a code c9", ["s3", "c9"], "a secret [redacted] and a code [redacted]"),
            ("nothing to hide", ["abc123"], "nothing to hide"),
            ("short", ["a longer secret"], "short"),
            ("ends with tok", ["tok"], "ends with [redacted]"),
        ] as [(String, [String], String)])
    func redacts(text: String, secrets: [String], expected: String) {
        #expect(SecretRedaction.redact(text, secrets: secrets) == expected)
    }

    @Test func onlySecretFieldsOfTheFormAreSecrets() {
        let form = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", "st"),
            ("audience", "orders"), ("client_assertion", "jwt"), ("client_secret", ""), ("scope", "read"),
        ]
        #expect(SecretRedaction.secrets(of: form) == ["st", "jwt"])
        #expect(OAuthFailure.refused("invalid_grant: st").redacting(["st"]) == .refused("invalid_grant: [redacted]"))
    }
}
