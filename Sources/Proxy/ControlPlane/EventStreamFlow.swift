/// What one `/_platform/auth/events` stream may hold for a client that does not keep up (docs/login.md,
/// "Several providers"). A `state` event is a snapshot: a stream whose client has not taken what
/// was queued gets nothing more queued, only remembers which providers changed, and is sent
/// their state as it is then once the client reads again (intermediate states are skipped).
/// Other events (`journey`, `login`) are held in order; past `cap` bytes queued and held the
/// stream is closed (the client reconnects and starts from the current states). A value:
/// events in, actions out, tested as a table.
struct EventStreamFlow: Equatable {
    /// Something to send.
    enum Item: Equatable {
        /// The named provider's `state` event, rendered when written (its state then).
        case state(provider: String)
        /// An event that is not a snapshot, rendered already.
        case event([UInt8])
        /// The keep-alive comment: only for a stream that has nothing waiting.
        case keepAlive
    }

    /// Where the stream is.
    enum State: Equatable {
        /// The client takes what is queued: items are written at once.
        case flowing
        /// The client is behind: `held` waits for the output to drain (states once each, in
        /// order of their first change); `heldBytes` counts the rendered events among them.
        case behind(held: [Item], heldBytes: Int)
        /// Closed for falling too far behind; nothing more is written.
        case closed
    }

    /// What the owner does.
    enum Action: Equatable {
        case none
        /// Write these items, in order.
        case write([Item])
        /// Write nothing now; tell the flow (`drained`) when the queued output went down.
        case waitForDrain
        /// Close the stream: it would hold more than `cap` bytes.
        case close
    }

    /// Queued bytes from which a stream counts as behind.
    static let holdAt = 16 * 1024
    /// Most bytes a stream may have queued and held together.
    static let cap = 64 * 1024

    private(set) var state: State = .flowing

    /// `item` is to be sent while `queued` bytes wait for the client.
    mutating func offer(_ item: Item, queued: Int) -> Action {
        switch state {
        case .closed:
            return .none
        case .flowing:
            guard queued >= Self.holdAt else { return .write([item]) }
            // A stream with bytes waiting is not idle: the keep-alive has nothing to do.
            if item == .keepAlive { return .none }
            state = .behind(held: [item], heldBytes: Self.bytes(item))
            return queued + Self.bytes(item) > Self.cap ? close() : .waitForDrain
        case .behind(var held, var heldBytes):
            switch item {
            case .keepAlive: return .none
            case .state where held.contains(item): return .none
            case .state: held.append(item)
            case .event(let bytes):
                held.append(item)
                heldBytes += bytes.count
            }
            state = .behind(held: held, heldBytes: heldBytes)
            return queued + heldBytes > Self.cap ? close() : .none
        }
    }

    /// The output went down to `queued` bytes after `waitForDrain`.
    mutating func drained(queued: Int) -> Action {
        guard case .behind(let held, _) = state else { return .none }
        guard queued < Self.holdAt else { return .waitForDrain }
        state = .flowing
        return held.isEmpty ? .none : .write(held)
    }

    /// The stream ends (the proxy stops): what is held, to write before the last chunk.
    mutating func end() -> [Item] {
        defer { state = .closed }
        if case .behind(let held, _) = state { return held }
        return []
    }

    private mutating func close() -> Action {
        state = .closed
        return .close
    }

    private static func bytes(_ item: Item) -> Int {
        if case .event(let bytes) = item { return bytes.count }
        return 0
    }
}
