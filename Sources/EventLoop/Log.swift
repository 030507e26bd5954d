import Glibc
import JSON
import Synchronization

/// Severity of a log line.
public enum LogLevel: Int, Sendable, Comparable {
    case debug, info, warning, error
    /// The name a log line carries.
    var name: StaticString {
        switch self {
        case .debug: "debug";
        case .info: "info";
        case .warning: "warning";
        case .error: "error"
        }
    }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    /// Parses `debug`, `info`, `warning` or `error`.
    public init?(name: String) {
        switch name {
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }
}

/// A value in a log line.
public enum LogValue: Sendable {
    case string(String), int(Int), double(Double), bool(Bool)
}

/// JSON-lines logging to stderr: one object per line with `time`, `level`, `event` and fields.
/// Callers pass only values that are safe to print; no secret is ever given to the log.
public enum Log {
    private static let minimum = Atomic<Int>(LogLevel.info.rawValue)

    /// Sets the lowest level written.
    public static func setMinimumLevel(_ level: LogLevel) { minimum.store(level.rawValue, ordering: .relaxed) }

    /// Whether lines at `level` are written.
    public static func enabled(_ level: LogLevel) -> Bool { level.rawValue >= minimum.load(ordering: .relaxed) }

    /// Writes one line now (lifecycle events; request lines go through `LogBuffer`).
    public static func emit(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
        guard enabled(level) else { return }
        var line: [UInt8] = []
        format(level, event, fields.map { ($0.key, $0.value) }, into: &line)
        write(line)
    }

    /// Writes one line now with fields built at run time (a component adding its own, such as `provider`).
    public static func emit(_ level: LogLevel, _ event: String, fields: [(String, LogValue)]) {
        guard enabled(level) else { return }
        var line: [UInt8] = []
        format(level, event, fields, into: &line)
        write(line)
    }

    /// Appends one formatted line to `line` (lines written at once, and tests).
    static func format(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)], into line: inout [UInt8]) {
        var text = LogLine(capacity: 256)
        text.write(level, event, fields)
        text.withBytes { line.append(contentsOf: $0) }
    }

    /// Writes plain text (CLI messages) to stderr.
    public static func writeStandardError(_ text: String) { write(Array(text.utf8)) }

    static func write(_ bytes: [UInt8]) { bytes.withUnsafeBytes { write($0) } }

    static func write(_ raw: UnsafeRawBufferPointer) { write(raw, to: 2) }

    /// One writer at a time: a loop's flush (up to 64 KiB, more than a pipe takes in one
    /// write) and a line written at once from another thread (a reload, a refresh) would
    /// otherwise interleave, splicing one line into the middle of another.
    private static let writing = Mutex(())

    static func write(_ raw: UnsafeRawBufferPointer, to fd: CInt) {
        writing.withLock { _ in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
}

/// A per-loop buffer of log lines, as nginx's `access_log … buffer=64k flush=1s`: info and
/// debug lines (the access log) are written when 64 KiB are queued or a second after the first
/// one, so a busy loop makes one write(2) for hundreds of requests; warnings and errors go out at
/// once (with what is queued before them, keeping the order). The rest is written when the loop
/// stops. Lines are composed in place, at the end of what is queued.
public final class LogBuffer {
    private var pending = LogLine(capacity: LogBuffer.flushBytes + 4096)
    private var flushTimer: TimerID?
    private let loop: EventLoop

    /// Bytes queued before a write.
    public static let flushBytes = 64 * 1024
    /// Seconds a queued line waits at most.
    public static let flushSeconds = 1.0

    /// Creates a buffer for `loop`, flushed when the loop stops.
    public init(loop: EventLoop) {
        self.loop = loop
        loop.whenStopped { [weak self] in self?.flush() }
    }

    /// Queues one line.
    public func emit(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)]) {
        guard Log.enabled(level) else { return }
        pending.write(level, event, fields)
        queued(level)
    }

    /// Queues one line whose fields `fields` writes, in order, straight into the queue: no array
    /// of fields and no String per value (every request's access line goes this way).
    public func emit(_ level: LogLevel, _ event: StaticString, fields: (inout LogLine) -> Void) {
        guard Log.enabled(level) else { return }
        pending.begin(level, event)
        fields(&pending)
        pending.end()
        queued(level)
    }

    private func queued(_ level: LogLevel) {
        if level >= .warning || pending.count >= Self.flushBytes { return flush() }
        guard flushTimer == nil else { return }
        flushTimer = loop.schedule(at: loop.now.adding(seconds: Self.flushSeconds)) { [weak self] in
            self?.flushTimer = nil
            self?.flush()
        }
    }

    /// Writes what is queued.
    public func flush() {
        if let flushTimer {
            loop.cancel(flushTimer)
            self.flushTimer = nil
        }
        guard pending.count > 0 else { return }
        pending.withBytes { Log.write($0) }
        pending.removeAll(shrinkingAbove: 1 << 20)
    }
}
