import CCurl
import Testing
@testable import Upstream

@Suite("EasyHandle")
struct EasyHandleTests {
    /// The lines of the list handed to curl, in order.
    private func listed(_ handle: EasyHandle) -> [String] {
        var result: [String] = []
        var node = handle.headerList
        while let current = node {
            result.append(String(cString: current.pointee.data))
            node = current.pointee.next
        }
        return result
    }

    @Test("header list holds every line in order when it outgrows its node storage")
    func headerListGrows() {
        let handle = EasyHandle()
        let many = (0..<40).map { "X-Field-\($0): value \($0)" }
        handle.setHeaders(HeaderLines(many), HeaderLines(["Authorization: Bearer t"]),
                          blankAccept: true, blankContentType: false, blankExpect: true)
        #expect(listed(handle) == many + ["Authorization: Bearer t", "Expect:", "accept:"])
        handle.setHeaders(HeaderLines(["A: 1"]), HeaderLines(), blankAccept: false, blankContentType: true, blankExpect: false)
        #expect(listed(handle) == ["A: 1", "content-type:"])
    }

    @Test("no lines hands curl no list")
    func emptyList() {
        let handle = EasyHandle()
        handle.setHeaders(HeaderLines(), HeaderLines(), blankAccept: false, blankContentType: false, blankExpect: false)
        #expect(handle.headerList == nil)
    }
}
