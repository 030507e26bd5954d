import Testing

@testable import Analytics

@Suite("AnalyticsUploader.withoutQuery")
struct RedirectLocationTests {
    @Test(
        "a redirect's target is named up to its query or fragment",
        arguments: [
            ("https://a.example/v2/ingest?sig=s&cred=c", "https://a.example/v2/ingest"),
            ("https://a.example/v2#frag?x", "https://a.example/v2"),
            ("/moved?token=t", "/moved"),
            ("https://a.example/plain", "https://a.example/plain"),
            ("?only", ""),
        ])
    func withoutQuery(location: String, named: String) {
        #expect(AnalyticsUploader.withoutQuery(location) == named)
    }
}
