/// The secrets a token-endpoint call sent, taken out of what the server wrote back. A server may
/// quote what it refused in its `error_description` ("subject_token eyJ… is expired"), and that
/// text goes to the log, to `lastError` and, for a refused token exchange, to the client.
enum SecretRedaction {
    /// Form fields whose values are secrets (RFC 6749, 7009, 7523, 7636, 8628, 8693).
    static let secretFields: Set<String> = [
        "client_secret", "client_assertion", "code", "code_verifier", "refresh_token", "device_code",
        "subject_token", "actor_token", "token", "assertion",
    ]

    /// The values of `form`'s secret fields.
    static func secrets(of form: [(String, String)]) -> [String] {
        form.compactMap { secretFields.contains($0.0) && !$0.1.isEmpty ? $0.1 : nil }
    }

    /// `text` with every occurrence of each of `secrets` replaced by `[redacted]`.
    static func redact(_ text: String, secrets: [String]) -> String {
        var bytes = Array(text.utf8)
        for secret in secrets {
            let needle = Array(secret.utf8)
            guard !needle.isEmpty, needle.count <= bytes.count else { continue }
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count)
            var i = 0
            while i < bytes.count {
                if i + needle.count <= bytes.count, bytes[i] == needle[0],
                    bytes[i..<i + needle.count].elementsEqual(needle)
                {
                    out += "[redacted]".utf8
                    i += needle.count
                } else {
                    out.append(bytes[i])
                    i += 1
                }
            }
            bytes = out
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension OAuthFailure {
    /// The failure with `secrets` taken out of its reason.
    func redacting(_ secrets: [String]) -> OAuthFailure {
        guard !secrets.isEmpty else { return self }
        switch self {
        case .refused(let reason): return .refused(SecretRedaction.redact(reason, secrets: secrets))
        case .unavailable(let reason): return .unavailable(SecretRedaction.redact(reason, secrets: secrets))
        }
    }
}
