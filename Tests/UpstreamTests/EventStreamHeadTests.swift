import Testing

@testable import Upstream

/// A head made of a 200 status line and `fields`.
private func head(_ fields: String...) -> UpstreamResponseHead {
    var head = UpstreamResponseHead(status: 0)
    for line in ["HTTP/1.1 200 OK\r\n"] + fields.map({ $0 + "\r\n" }) + ["\r\n"] {
        _ = Array(line.utf8).withUnsafeBytes { head.read(line: $0) }
    }
    return head
}

@Suite("UpstreamResponseHead.isEventStream")
struct EventStreamHeadTests {
    @Test("text/event-stream in any case, with parameters, is an event stream")
    func eventStreams() {
        #expect(head("Content-Type: text/event-stream").isEventStream)
        #expect(head("content-type: Text/Event-Stream; charset=utf-8").isEventStream)
        #expect(head("Content-Type: text/event-stream;charset=utf-8").isEventStream)
    }

    @Test("other types, no type, a longer type name or a Content-Length are not")
    func others() {
        #expect(!head("Content-Type: application/json").isEventStream)
        #expect(!head().isEventStream)
        #expect(!head("Content-Type: text/event-streams").isEventStream)
        #expect(!head("Content-Type: text/event-stream", "Content-Length: 12").isEventStream)
    }
}
