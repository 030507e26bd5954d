/// A request body passing from the client connection to a curl transfer, with backpressure
/// both ways, and kept whole for a replay (redirect 307/308, 401 retry) while it stays small.
public final class RequestBody {
    /// Whether every byte is kept for a replay, or bytes are dropped once read.
    public enum Retention: Sendable, Equatable {
        /// Every byte so far is kept: not past the replay limit.
        case whole
        /// Past the replay limit: bytes are dropped once curl read them; never kept again.
        case streamed
    }

    /// The body's lifecycle: the client sends, then ends it; retention only goes from whole to
    /// streamed.
    public enum State: Sendable, Equatable {
        /// The client is still sending.
        case receiving(Retention)
        /// The client finished the body.
        case ended(Retention)

        var retention: Retention {
            switch self {
            case .receiving(let retention), .ended(let retention): retention
            }
        }

        /// `total` bytes have arrived: past `limit`, the body is no longer kept whole.
        mutating func received(total: Int, limit: Int) {
            guard total > limit else { return }
            switch self {
            case .receiving(.whole): self = .receiving(.streamed)
            case .ended(.whole): self = .ended(.streamed)
            case .receiving(.streamed), .ended(.streamed): break
            }
        }

        /// The client finished the body.
        mutating func finished() {
            if case .receiving(let retention) = self { self = .ended(retention) }
        }
    }

    private var storage: [UInt8] = []
    private var readIndex = 0
    private let replayLimit: Int
    public private(set) var state = State.receiving(.whole)
    /// Whether the client finished the body.
    public var ended: Bool { if case .ended = state { true } else { false } }
    /// Bytes received from the client so far.
    public private(set) var totalBytes = 0
    /// Called (after the current event) when buffered bytes fell below the low-water mark.
    public var onDrained: (() -> Void)?
    var onData: (() -> Void)?

    /// Above this many unread bytes the client should be paused.
    public static let highWater = 256 * 1024
    private static let lowWater = 64 * 1024

    /// A body keeping up to `replayLimit` bytes for a replay.
    public init(replayLimit: Int) { self.replayLimit = replayLimit }

    /// Unread bytes.
    public var buffered: Int { storage.count - readIndex }

    /// Whether the whole body is kept, so another transfer can send it again.
    public var isReplayable: Bool { state == .ended(.whole) }

    /// A fresh body with the same bytes, for a replay; nil unless `isReplayable`.
    public func replay() -> RequestBody? {
        guard isReplayable else { return nil }
        let copy = RequestBody(replayLimit: replayLimit)
        copy.storage = storage
        copy.totalBytes = totalBytes
        copy.state = .ended(.whole)
        return copy
    }

    /// Adds client bytes.
    public func append(_ bytes: UnsafeRawBufferPointer) {
        totalBytes += bytes.count
        state.received(total: totalBytes, limit: replayLimit)
        if state.retention == .streamed && readIndex > 0 && readIndex >= storage.count / 2 {
            storage.removeFirst(readIndex)
            readIndex = 0
        }
        storage.append(contentsOf: bytes)
        onData?()
    }

    /// The client finished the body.
    public func finish() {
        state.finished()
        onData?()
    }

    enum ReadResult { case bytes(Int), wait, end }

    /// Copies unread bytes into `buffer` for curl.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        let available = storage.count - readIndex
        guard available > 0 else { return ended ? .end : .wait }
        let n = min(available, buffer.count)
        storage.withUnsafeBytes { src in
            buffer.baseAddress!.copyMemory(from: src.baseAddress! + readIndex, byteCount: n)
        }
        let before = available
        readIndex += n
        if state.retention == .streamed && readIndex == storage.count {
            storage.removeAll(keepingCapacity: true)
            readIndex = 0
        }
        if before >= Self.lowWater && buffered < Self.lowWater { onDrained?() }
        return .bytes(n)
    }
}
