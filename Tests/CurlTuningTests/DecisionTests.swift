import Testing

@testable import CurlTuning

@Suite("LibcurlTuning: on only with a verified libcurl, off on the switch")
struct DecisionTests {
    @Test(
        "the switch and the running libcurl decide",
        arguments: [
            // (switch, version, TLS library, decision)
            (
                nil, UInt32(0x07_58_01), "OpenSSL/3.0.19",
                LibcurlTuning.Decision.on(libcurl: "libcurl 7.88.1 (OpenSSL/3.0.19)")
            ),
            ("on", 0x07_58_01, "OpenSSL/3.0.19", .on(libcurl: "libcurl 7.88.1 (OpenSSL/3.0.19)")),
            ("", 0x07_58_01, "OpenSSL/3.0.19", .on(libcurl: "libcurl 7.88.1 (OpenSSL/3.0.19)")),
            ("off", 0x07_58_01, "OpenSSL/3.0.19", .off(reason: "PLATFORM_PROXY_CURL_TUNING=off")),
            (
                nil, 0x08_05_00, "OpenSSL/3.0.19",
                .off(reason: "libcurl 8.5.0 (OpenSSL/3.0.19) is not a version the tuning was verified with (7.88.1)")
            ),
            (
                nil, 0x07_58_01, "GnuTLS/3.7.9",
                .off(
                    reason: "libcurl 7.88.1 (GnuTLS/3.7.9) does not speak TLS through OpenSSL, as the verified one does"
                )
            ),
            ("false", 0x07_58_01, "OpenSSL/3.0.19", .invalidSwitch("false")),
            ("off", 0x08_05_00, "OpenSSL/3.0.19", .off(reason: "PLATFORM_PROXY_CURL_TUNING=off")),
        ] as [(String?, UInt32, String, LibcurlTuning.Decision)])
    func decides(switchValue: String?, version: UInt32, tls: String, decision: LibcurlTuning.Decision) {
        let text = "\(version >> 16).\((version >> 8) & 0xFF).\(version & 0xFF)"
        #expect(
            LibcurlTuning.decide(switchValue: switchValue, version: version, versionText: text, tls: tls) == decision)
    }
}
