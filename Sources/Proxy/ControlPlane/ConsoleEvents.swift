import EventLoop
import HTTPServer
import JSON

/// What one `/_platform/console/events` stream has been sent of the request rings: the last
/// sequence number seen from each loop. Records are numbered per loop, so "newer" is per loop.
struct RequestFeedCursor: Equatable {
    private(set) var seen: [Int: UInt64] = [:]

    /// The records of `gathered` not sent yet, oldest first; remembers them as sent. A new
    /// stream is sent everything the rings hold (the page merges records by id, so a stream
    /// opened again after a drop repeats nothing it shows twice).
    mutating func fresh(_ gathered: [(loop: Int, record: RequestRecord)]) -> [(loop: Int, record: RequestRecord)] {
        var out: [(loop: Int, record: RequestRecord)] = []
        for item in gathered {
            let last = seen[item.loop]
            if last.map({ item.record.sequence > $0 }) ?? true { out.append(item) }
            seen[item.loop] = max(last ?? 0, item.record.sequence)
        }
        return out.sorted { $0.record.time < $1.record.time }
    }
}

extension ProxyHandler {
    /// How often an open console stream looks for new requests in the rings.
    static let consoleFeedSeconds = 0.5

    /// `GET /_platform/console/events`: the auth event stream (`state` events, flow control,
    /// keep-alives and ending at shutdown as `/_platform/auth/events`), plus one `request` event
    /// per exchange in the rings: those held when it opens, then each one as it finishes. The rings are read only
    /// while a console is open: forwarding never does more for it than fill its loop's ring.
    func openConsoleEvents(_ context: ExchangeContext) {
        openEventStream(context)
        guard let stream = eventStreams.last, stream.context === context else { return }
        followRequests(stream, cursor: RequestFeedCursor())
    }

    private func followRequests(_ stream: AuthEventStream, cursor: RequestFeedCursor) {
        hub.gatherRequests(on: loop) { [weak self, weak stream] gathered in
            guard let self, let stream, self.eventStreams.contains(where: { $0 === stream }) else { return }
            var cursor = cursor
            for item in cursor.fresh(gathered) {
                let data = item.record.json(loop: item.loop).serializedBytes()
                self.offer(.event(Array("event: request\ndata: ".utf8) + data + Array("\n\n".utf8)), to: stream)
            }
            _ = self.loop.schedule(at: self.loop.now.adding(seconds: Self.consoleFeedSeconds)) {
                [weak self, weak stream] in
                guard let self, let stream, self.eventStreams.contains(where: { $0 === stream }) else { return }
                self.followRequests(stream, cursor: cursor)
            }
        }
    }
}
