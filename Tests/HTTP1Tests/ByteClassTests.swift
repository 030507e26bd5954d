import Testing

@testable import HTTP1

/// The byte classes are bit masks; these are their definitions written out plainly.
@Suite("Byte classes")
struct ByteClassTests {
    static let alphaDigit = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

    @Test("tchar agrees with RFC 9110 §5.6.2 for every byte value")
    func token() {
        let tchar = Self.alphaDigit.union("!#$%&'*+-.^_`|~".utf8)
        for b in UInt8.min...UInt8.max { #expect(ByteClass.isToken(b) == tchar.contains(b), "byte \(b)") }
    }

    @Test("field values allow HTAB, SP, VCHAR and obs-text and nothing else, for every byte value")
    func fieldValue() {
        for b in UInt8.min...UInt8.max {
            let allowed = b == 0x09 || b == 0x20 || (0x21...0x7E).contains(b) || b >= 0x80
            #expect(ByteClass.isFieldValue(b) == allowed, "byte \(b)")
        }
    }

    @Test("request targets allow visible ASCII except the fragment mark, for every byte value")
    func target() {
        for b in UInt8.min...UInt8.max {
            #expect(ByteClass.isTarget(b) == ((0x21...0x7E).contains(b) && b != UInt8(ascii: "#")), "byte \(b)")
        }
    }

    @Test(
        "Host allows unreserved, pct-encoded, sub-delims without the comma, and the IP-literal marks, for every byte value"
    )
    func host() {
        let allowed = Self.alphaDigit.union("-._~%!$&'()*+;=:[]".utf8)
        for b in UInt8.min...UInt8.max { #expect(ByteClass.isHost(b) == allowed.contains(b), "byte \(b)") }
    }
}
