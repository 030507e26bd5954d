import EventLoop
import HTTPServer

/// One open `/_platform/auth/events` stream on this loop: its exchange's context and what its
/// flow holds for a client that does not keep up (`EventStreamFlow`).
final class AuthEventStream {
    let context: ExchangeContext
    var exchange: HTTPExchange { context.exchange }
    var flow = EventStreamFlow()

    init(_ context: ExchangeContext) { self.context = context }
}

extension ProxyHandler {
    /// Opens a Server-Sent Events stream: one `state` event per provider now (the default
    /// provider first) and one at every change, each naming its provider.
    func openEventStream(_ context: ExchangeContext) {
        context.exchange.startResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                ("X-Request-ID", context.requestID),
            ],
            framing: .streamed)
        // HEAD gets the head only: held open, it would never end and the next request on its
        // connection would wait forever.
        if context.exchange.isHeadRequest { return context.exchange.endResponse() }
        // A client that hangs up ends the exchange; `finished` takes it off the list.
        let stream = AuthEventStream(context)
        eventStreams.append(stream)
        context.onWritable = { [weak self, weak stream] in
            guard let self, let stream else { return }
            self.perform(stream.flow.drained(queued: stream.exchange.queuedBytes), stream)
        }
        let first = slot(nil)
        offer(.state(provider: first.name), to: stream)
        for name in providerNames where name != first.name { offer(.state(provider: name), to: stream) }
        if heartbeat == nil { scheduleHeartbeat() }
    }

    /// `slot`'s provider changed state: every stream on this loop hears it.
    func broadcastState(_ slot: ProviderSlot) {
        broadcast(.state(provider: slot.name))
    }

    /// A rendered event (`journey`, `login`) for every stream on this loop.
    func broadcastEvent(_ name: String, data: [UInt8]) {
        guard !eventStreams.isEmpty else { return }
        broadcast(.event(Array("event: \(name)\ndata: ".utf8) + data + Array("\n\n".utf8)))
    }

    private func broadcast(_ item: EventStreamFlow.Item) {
        // The loop walks a copy: a stream closed for falling behind leaves the list meanwhile.
        for stream in eventStreams { offer(item, to: stream) }
    }

    /// Ends every stream (the proxy stops): what a stream held is written before its last chunk.
    func endEventStreams() {
        let streams = eventStreams
        eventStreams.removeAll()
        for stream in streams {
            for item in stream.flow.end() { write(item, to: stream.exchange) }
            stream.exchange.endResponse()
        }
    }

    func offer(_ item: EventStreamFlow.Item, to stream: AuthEventStream) {
        perform(stream.flow.offer(item, queued: stream.exchange.queuedBytes), stream)
    }

    /// Carries out what `stream`'s flow decided.
    private func perform(_ action: EventStreamFlow.Action, _ stream: AuthEventStream) {
        switch action {
        case .none:
            break
        case .write(let items):
            for item in items { write(item, to: stream.exchange) }
        case .waitForDrain:
            // Asked now, so the output's next drain is reported (`onWritable`).
            if stream.exchange.canWrite(below: EventStreamFlow.holdAt) {
                perform(stream.flow.drained(queued: stream.exchange.queuedBytes), stream)
            }
        case .close:
            eventStreams.removeAll { $0 === stream }
            Log.emit(
                .warning, "event_stream_closed",
                fields: [
                    ("requestID", .string(stream.context.requestID)),
                    ("reason", .string("the client fell too far behind")),
                ])
            stream.exchange.abort(reason: "event_stream_behind")
        }
    }

    private func write(_ item: EventStreamFlow.Item, to exchange: HTTPExchange) {
        let bytes: [UInt8]
        switch item {
        case .state(let provider):
            bytes = Array("event: state\ndata: ".utf8) + eventJSON(slot(provider)) + Array("\n\n".utf8)
        case .event(let rendered): bytes = rendered
        case .keepAlive: bytes = Array(": keep-alive\n\n".utf8)
        }
        bytes.withUnsafeBytes { exchange.writeBody($0) }
    }

    /// A comment line every 15 s keeps intermediaries from closing idle streams and finds dead clients.
    private func scheduleHeartbeat() {
        heartbeat = loop.schedule(at: loop.now.adding(seconds: 15)) { [weak self] in
            guard let self else { return }
            self.heartbeat = nil
            self.eventStreams.removeAll { $0.exchange.isAborted || $0.exchange.responseEnded }
            guard !self.eventStreams.isEmpty else { return }
            self.broadcast(.keepAlive)
            self.scheduleHeartbeat()
        }
    }
}
