import Foundation
import JSON
import Testing

@testable import Config
@testable import Credentials

/// A throwaway key made by the openssl command (`genpkey`), as PEM.
func generatedKeyPEM(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "genpkey"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = Pipe()
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

let p256Arguments = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
let rsaArguments = ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]

@Suite struct ClientAssertionTests {
    /// Signs with a fresh key of `arguments` and checks the JWT's parts and its signature with libcrypto.
    func checkSigned(_ arguments: [String], algorithm: PrivateKeyPEM.Algorithm) throws {
        let key = try #require(PrivateKeyPEM(pem: try generatedKeyPEM(arguments)))
        #expect(try key.algorithm.get() == algorithm)
        let jwt = try #require(
            ClientAssertion.sign(
                clientID: "workload", audience: "https://idp.test/token", key: key,
                algorithm: algorithm, keyID: "k1", now: 1_000_000.5, jti: "j-1"))
        let parts = jwt.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let header = try JSONValue.parse(try #require(Base64URL.decode(parts[0])))
        let claims = try JSONValue.parse(try #require(Base64URL.decode(parts[1])))
        #expect(header["alg"]?.stringValue == algorithm.rawValue && header["kid"]?.stringValue == "k1")
        #expect(claims["iss"]?.stringValue == "workload" && claims["sub"]?.stringValue == "workload")
        #expect(claims["aud"]?.stringValue == "https://idp.test/token" && claims["jti"]?.stringValue == "j-1")
        #expect(claims["iat"]?.doubleValue == 1_000_000 && claims["exp"]?.doubleValue == 1_000_060)
        let signature = try #require(Base64URL.decode(parts[2]))
        if algorithm == .es256 { #expect(signature.count == 64) }
        #expect(key.verify(Array((parts[0] + "." + parts[1]).utf8), signature: signature))
        // Another claim set under the same signature does not verify.
        #expect(!key.verify(Array((parts[0] + "." + parts[0]).utf8), signature: signature))
    }

    @Test func es256AssertionsVerifyWithTheKey() throws { try checkSigned(p256Arguments, algorithm: .es256) }

    @Test func rs256AssertionsVerifyWithTheKey() throws { try checkSigned(rsaArguments, algorithm: .rs256) }

    @Test func eachAssertionHasItsOwnJTI() throws {
        let key = try #require(PrivateKeyPEM(pem: try generatedKeyPEM(p256Arguments)))
        let jtis = try (0..<5).map { _ in
            let jwt = try #require(
                ClientAssertion.sign(clientID: "c", audience: "a", key: key, algorithm: .es256, keyID: nil, now: 0))
            let claims = try JSONValue.parse(try #require(Base64URL.decode(jwt.split(separator: ".")[1])))
            return try #require(claims["jti"]?.stringValue)
        }
        #expect(Set(jtis).count == 5)
    }

    @Test func keysThatCannotSignAssertionsSayWhy() throws {
        let p384 = try #require(
            PrivateKeyPEM(pem: try generatedKeyPEM(["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])))
        #expect(throws: PrivateKeyProblem.self) { try p384.algorithm.get() }
        let ed25519 = try #require(PrivateKeyPEM(pem: try generatedKeyPEM(["-algorithm", "ED25519"])))
        #expect(throws: PrivateKeyProblem.self) { try ed25519.algorithm.get() }
        #expect(PrivateKeyPEM(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") == nil)
        #expect(PrivateKeyPEM(pem: "") == nil)
    }
}

@Suite struct ExchangedTokenTests {
    /// Stale within 30 s of expiry, or past half the life of a shorter-lived token; never without an expiry.
    @Test(arguments: [
        (obtained: 0.0, expires: 3600.0, now: 3569.0, stale: false),
        (obtained: 0.0, expires: 3600.0, now: 3570.0, stale: true),
        (obtained: 0.0, expires: 10.0, now: 4.9, stale: false),
        (obtained: 0.0, expires: 10.0, now: 5.0, stale: true),
        (obtained: 0.0, expires: 10.0, now: 11.0, stale: true),
    ])
    func staleness(obtained: Double, expires: Double, now: Double, stale: Bool) {
        let token = ExchangedToken(
            value: "t", tokenType: "Bearer", expiresAt: expires, obtainedAt: obtained, generation: 1)
        #expect(token.isStale(now: now) == stale)
    }

    @Test func aTokenWithoutExpiryIsNeverStale() {
        let token = ExchangedToken(value: "t", tokenType: "Bearer", expiresAt: nil, obtainedAt: 0, generation: 1)
        #expect(!token.isStale(now: 1e9))
    }
}

@Suite struct ExchangeTableTests {
    static let orders = TokenExchangeConfiguration(audience: "orders")
    static let billing = TokenExchangeConfiguration(audience: "billing")

    static func token(_ generation: UInt64, expires: Double? = 100) -> ExchangedToken {
        ExchangedToken(
            value: "t\(generation)", tokenType: "Bearer", expiresAt: expires, obtainedAt: 0, generation: generation)
    }

    /// One step: a request (`ask`) or an answer, and the action a request gets.
    enum Step {
        case ask(TokenExchangeConfiguration, generation: UInt64, now: Double, expect: ExchangeTable.Action)
        case answer(TokenExchangeConfiguration, generation: UInt64, token: ExchangedToken?)
        case logout(generation: UInt64)
    }

    static let tables: [(String, [Step])] = [
        (
            "the first request starts the exchange, the others wait, then all get the token",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .ask(orders, generation: 1, now: 0, expect: .wait),
                .answer(orders, generation: 1, token: token(1)),
                .ask(orders, generation: 1, now: 10, expect: .reply(token(1))),
            ]
        ),
        (
            "each target is exchanged on its own",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .ask(billing, generation: 1, now: 0, expect: .start),
                .answer(orders, generation: 1, token: token(1)),
                .ask(billing, generation: 1, now: 0, expect: .wait),
            ]
        ),
        (
            "a stale token is exchanged again",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .answer(orders, generation: 1, token: token(1)),
                .ask(orders, generation: 1, now: 69, expect: .reply(token(1))),
                .ask(orders, generation: 1, now: 70, expect: .start),
            ]
        ),
        (
            "a failed exchange leaves nothing: the next request tries again",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .answer(orders, generation: 1, token: nil),
                .ask(orders, generation: 1, now: 0, expect: .start),
            ]
        ),
        (
            "a new subject token drops the tokens of the old one",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .answer(orders, generation: 1, token: token(1)),
                .ask(orders, generation: 2, now: 0, expect: .start),
            ]
        ),
        (
            "an answer for an old subject token is not kept",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .ask(orders, generation: 2, now: 0, expect: .start),
                .answer(orders, generation: 1, token: token(1)),
                .ask(orders, generation: 2, now: 0, expect: .wait),
                .answer(orders, generation: 2, token: token(2)),
                .ask(orders, generation: 2, now: 0, expect: .reply(token(2))),
            ]
        ),
        (
            "a logout drops every token",
            [
                .ask(orders, generation: 1, now: 0, expect: .start),
                .answer(orders, generation: 1, token: token(1)),
                .logout(generation: 2),
                .ask(orders, generation: 3, now: 0, expect: .start),
            ]
        ),
    ]

    @Test(arguments: tables) func steps(name: String, steps: [Step]) {
        var table = ExchangeTable()
        for (index, step) in steps.enumerated() {
            switch step {
            case .ask(let target, let generation, let now, let expected):
                #expect(table.asked(target, generation: generation, now: now) == expected, "\(name): step \(index)")
            case .answer(let target, let generation, let token):
                table.answered(target, generation: generation, token: token)
            case .logout(let generation):
                table.follow(generation: generation, loggedIn: false)
            }
        }
    }
}

@Suite struct ExchangeWaitersTests {
    static let orders = TokenExchangeConfiguration(audience: "orders")
    static let billing = TokenExchangeConfiguration(audience: "billing")

    /// One step: a request waiting (`add`), or an answer and the requests it goes to.
    enum Step {
        case add(Int, TokenExchangeConfiguration, generation: UInt64)
        case take(TokenExchangeConfiguration, generation: UInt64, expect: [Int])
    }

    static let tables: [(String, [Step])] = [
        (
            "an answer goes to every request of its target and generation, in order",
            [
                .add(1, orders, generation: 1), .add(2, orders, generation: 1),
                .take(orders, generation: 1, expect: [1, 2]),
                .take(orders, generation: 1, expect: []),
            ]
        ),
        (
            "an answer of the previous subject token leaves the requests of the new one waiting",
            [
                .add(1, orders, generation: 1), .add(2, orders, generation: 2), .add(3, orders, generation: 2),
                .take(orders, generation: 1, expect: [1]),
                .take(orders, generation: 2, expect: [2, 3]),
            ]
        ),
        (
            "the new subject token's answer first: the old requests still get theirs",
            [
                .add(1, orders, generation: 1), .add(2, orders, generation: 2),
                .take(orders, generation: 2, expect: [2]),
                .take(orders, generation: 1, expect: [1]),
            ]
        ),
        (
            "another target's answer takes none",
            [
                .add(1, orders, generation: 1), .add(2, billing, generation: 1),
                .take(billing, generation: 1, expect: [2]),
                .take(orders, generation: 1, expect: [1]),
            ]
        ),
    ]

    @Test(arguments: tables) func steps(name: String, steps: [Step]) {
        var waiters = ExchangeWaiters<Int>()
        for (index, step) in steps.enumerated() {
            switch step {
            case .add(let reply, let target, let generation):
                waiters.add(reply, for: target, generation: generation)
            case .take(let target, let generation, let expected):
                #expect(waiters.take(target, generation: generation) == expected, "\(name): step \(index)")
            }
        }
        #expect(waiters.count(Self.orders) == 0 && waiters.count(Self.billing) == 0, "\(name): none left waiting")
    }
}
