import Config
import Glibc
import Testing

@testable import Proxy

private func write(_ text: String, to path: String) {
    guard let file = fopen(path, "w") else { fatalError("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
}

@Suite("ProxyRuntime.forLoop")
struct ProxyRuntimeForLoopTests {
    @Test("a loop's runtime keeps the apiKey its config was compiled with, even if the key file changed since")
    func keyFileRotatedBetweenCompiles() {
        let path = "/tmp/forloop-apikey-\(getpid())"
        write("old-key\n", to: path)
        defer { unlink(path) }
        let control = ProxyRuntime(configuration: ProxyConfiguration(configDirectory: "/tmp", apiKey: .file(path)))
        #expect(control.access.keyAccepted("old-key"))
        write("new-key\n", to: path)  // a rotation between the control plane's compile and one loop's
        let loop = control.forLoop()
        #expect(loop.access.keyAccepted("old-key"))
        #expect(!loop.access.keyAccepted("new-key"))
    }

    @Test("a key file that went away after the compile does not make one loop refuse everything")
    func keyFileRemovedBetweenCompiles() {
        let path = "/tmp/forloop-apikey-gone-\(getpid())"
        write("old-key\n", to: path)
        let control = ProxyRuntime(configuration: ProxyConfiguration(configDirectory: "/tmp", apiKey: .file(path)))
        unlink(path)
        #expect(control.forLoop().access.keyAccepted("old-key"))
    }

    @Test("every loop shares the mock switches and mock folder state, and has its own routes")
    func sharesMockStateOnly() {
        let configuration = ProxyConfiguration(
            configDirectory: "/tmp",
            routes: [
                RouteConfiguration(name: "api", path: "/api", upstream: UpstreamURL.parse("https://api.example/")!)
            ])
        let control = ProxyRuntime(configuration: configuration)
        let loop = control.forLoop()
        #expect(loop.mockModes === control.mockModes && loop.mocks === control.mocks)
        #expect(loop.router.routes[0] !== control.router.routes[0])
        #expect(loop.access.allowedHosts == control.access.allowedHosts)
    }
}
