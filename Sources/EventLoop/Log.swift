import Glibc
import JSON
import Synchronization

/// Severity of a log line.
public enum LogLevel: Int, Sendable, Comparable {
    case debug, info, warning, error
    /// The name a log line carries.
    var name: StaticString { switch self { case .debug: "debug"; case .info: "info"; case .warning: "warning"; case .error: "error" } }
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

    /// Appends one formatted line to `line`, byte by byte into the array: no String is made per
    /// field (interpolating each key and value made the access log line cost more instructions
    /// than forwarding the request, counted with callgrind).
    static func format(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)], into line: inout [UInt8]) {
        appendLiteral("{\"time\":\"", to: &line)
        appendTimestamp(into: &line)
        appendLiteral("\",\"level\":\"", to: &line)
        appendLiteral(level.name, to: &line)
        appendLiteral("\",\"event\":\"", to: &line)
        jsonAppendEscaped(event, to: &line)
        line.append(UInt8(ascii: "\""))
        for (key, value) in fields {
            appendLiteral(",\"", to: &line)
            jsonAppendEscaped(key, to: &line)
            appendLiteral("\":", to: &line)
            switch value {
            case .string(let s):
                line.append(UInt8(ascii: "\""))
                jsonAppendEscaped(s, to: &line)
                line.append(UInt8(ascii: "\""))
            case .int(let i): appendDecimal(i, into: &line)
            case .double(let d): line.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
            case .bool(let b): appendLiteral(b ? "true" : "false", to: &line)
            }
        }
        appendLiteral("}\n", to: &line)
    }

    /// A literal's bytes, copied from where the binary keeps them (appending a `String`'s UTF-8
    /// view goes through its generic copy, ~100 instructions each).
    @inline(__always)
    static func appendLiteral(_ text: StaticString, to line: inout [UInt8]) {
        line.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// `value` in decimal, from a stack buffer.
    static func appendDecimal(_ value: Int, into line: inout [UInt8]) {
        if value < 0 { line.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: any Int's 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// Writes plain text (CLI messages) to stderr.
    public static func writeStandardError(_ text: String) { write(Array(text.utf8)) }

    static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
                offset += n
            }
        }
    }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T11:30:00.123Z`.
    static func appendTimestamp(into line: inout [UInt8]) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = time_t(ts.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) { line.append(UInt8(48 + v / 10)); line.append(UInt8(48 + v % 10)) }
        appendDecimal(Int(parts.tm_year) + 1900, into: &line)
        line.append(UInt8(ascii: "-")); two(parts.tm_mon + 1)
        line.append(UInt8(ascii: "-")); two(parts.tm_mday)
        line.append(UInt8(ascii: "T")); two(parts.tm_hour)
        line.append(UInt8(ascii: ":")); two(parts.tm_min)
        line.append(UInt8(ascii: ":")); two(parts.tm_sec)
        let ms = Int32(ts.tv_nsec / 1_000_000)
        line.append(UInt8(ascii: ".")); line.append(UInt8(48 + ms / 100)); two(ms % 100)
        line.append(UInt8(ascii: "Z"))
    }
}

/// A per-loop buffer of log lines, as nginx's `access_log … buffer=64k flush=1s`: info and
/// debug lines (the access log) are written when 64 KiB are queued or a second after the first
/// one, so a busy loop makes one write(2) for hundreds of requests; warnings and errors go out at
/// once (with what is queued before them, keeping the order). The rest is written when the loop stops.
public final class LogBuffer {
    private var pending: [UInt8] = []
    private var flushTimer: TimerID?
    private let loop: EventLoop

    /// Bytes queued before a write.
    public static let flushBytes = 64 * 1024
    /// Seconds a queued line waits at most.
    public static let flushSeconds = 1.0

    /// Creates a buffer for `loop`, flushed when the loop stops.
    public init(loop: EventLoop) {
        self.loop = loop
        pending.reserveCapacity(Self.flushBytes + 4096)
        loop.whenStopped { [weak self] in self?.flush() }
    }

    /// Queues one line.
    public func emit(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)]) {
        guard Log.enabled(level) else { return }
        Log.format(level, event, fields, into: &pending)
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
        guard !pending.isEmpty else { return }
        Log.write(pending)
        pending.removeAll(keepingCapacity: pending.capacity <= 1 << 20)
    }
}
