import CCurl
import Testing

@testable import Upstream

@Suite("EasyHandle.renew: a new libcurl handle per transfer, with the same options")
struct EasyHandleRenewTests {
    /// What libcurl hands the callbacks and `CURLINFO_PRIVATE` for `handle`'s libcurl handle.
    private func privatePointer(_ handle: EasyHandle) -> UnsafeMutableRawPointer? {
        var pointer: UnsafeMutableRawPointer?
        guard cc_info_ptr(handle.easy, CURLINFO_PRIVATE, &pointer) == CURLE_OK else { return nil }
        return pointer
    }

    @Test("the copy is another libcurl handle, and still leads libcurl's callbacks to the same object")
    func renewedHandleKeepsItsOptions() {
        let handle = EasyHandle(client: nil)
        handle.setMethod(.withBody(method: "PUT", length: 3))
        handle.setTimeout(7)
        for _ in 0..<3 {
            // The copy is made before the old handle is freed, so it is at another address (a
            // later copy may take a freed one's).
            let used = handle.easy
            #expect(handle.renew())
            if EasyHandle.keepsFreedField {
                #expect(handle.easy != used, "renew kept the libcurl handle a transfer ran on")
            } else {
                #expect(handle.easy == used, "renew replaced a handle this libcurl can reuse")
            }
            #expect(privatePointer(handle) == Unmanaged.passUnretained(handle).toOpaque())
        }
    }
}
