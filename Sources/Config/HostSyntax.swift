#if canImport(Glibc)
import Glibc
#endif

/// Syntax checks shared by URLs, listen addresses and host lists.
enum HostSyntax {
    /// True for a dotted-quad IPv4 literal.
    static func isIPv4(_ s: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, s, &address) == 1
    }

    /// True for an IPv6 literal without brackets.
    static func isIPv6(_ s: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, s, &address) == 1
    }

    /// True for a DNS name or IPv4 literal: labels of letters, digits, '-' and '_' joined by dots.
    static func isRegName(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 253, !s.hasPrefix("."), !s.hasPrefix("-") else { return false }
        // All digits and dots reads as an address, so it must be a real one ("999.1.1.1" is not).
        if s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }) { return isIPv4(s) }
        return s.utf8.allSatisfy { b in
            (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39)
                || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_")
        } && !s.contains(text: "..")
    }

    /// A host as written in a URL: a name, an IPv4 literal, or a bracketed IPv6 literal; lowercased.
    static func normalizedHost(_ s: String) -> String? {
        if s.hasPrefix("[") {
            guard s.hasSuffix("]"), s.count > 2 else { return nil }
            let inner = String(s.dropFirst().dropLast())
            return isIPv6(inner) ? "[" + inner.lowercased() + "]" : nil
        }
        return isRegName(s) ? s.lowercased() : nil
    }

    /// Splits "host:port" or "[v6]:port" (port optional) into a normalized host and the port text.
    static func splitHostPort(_ s: String) -> (host: String, port: Substring?)? {
        let hostPart: Substring
        var portPart: Substring?
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            hostPart = s[...close]
            let rest = s[s.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portPart = rest.dropFirst()
            }
        } else if let colon = s.lastIndex(of: ":") {
            hostPart = s[..<colon]
            portPart = s[s.index(after: colon)...]
        } else {
            hostPart = s[...]
        }
        guard let host = normalizedHost(String(hostPart)) else { return nil }
        return (host, portPart)
    }

    /// A decimal port in `range`, without sign or leading '+'.
    static func port(_ s: Substring, in range: ClosedRange<Int> = 1...65535) -> UInt16? {
        guard !s.isEmpty, s.count <= 5, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(s), range.contains(value)
        else { return nil }
        return UInt16(value)
    }

    /// True for an RFC 9110 token (header names, token types).
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty
            && s.utf8.allSatisfy { b in
                switch b {
                case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
                default: return "!#$%&'*+-.^_`|~".utf8.contains(b)
                }
            }
    }
}
