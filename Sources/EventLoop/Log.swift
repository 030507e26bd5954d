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

    /// Appends one formatted line to `line`: composed in one buffer sized by an upper bound
    /// (on the stack for any usual line), then appended at once. No String is made per field,
    /// and no array append per piece (interpolating each key and value made the access log
    /// line cost more instructions than forwarding the request; ~30 appends were still 3.6k).
    static func format(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)], into line: inout [UInt8]) {
        // Every string at worst escaped byte for byte as `\u00XX` (6); a number in 32.
        var bound = 96 + 6 * event.utf8.count
        for (key, value) in fields {
            bound += 8 + 6 * key.utf8.count
            if case .string(let s) = value { bound += 6 * s.utf8.count } else { bound += 32 }
        }
        withUnsafeTemporaryAllocation(byteCount: bound, alignment: 1) { buffer in
            var out = LineWriter(buffer)
            out.write("{\"time\":\"")
            out.writeTimestamp()
            out.write("\",\"level\":\"")
            out.write(level.name)
            out.write("\",\"event\":\"")
            out.writeEscaped(event)
            out.write(byte: UInt8(ascii: "\""))
            for (key, value) in fields {
                out.write(",\"")
                out.writeEscaped(key)
                out.write("\":")
                switch value {
                case .string(let s):
                    out.write(byte: UInt8(ascii: "\""))
                    out.writeEscaped(s)
                    out.write(byte: UInt8(ascii: "\""))
                case .int(let i): out.writeDecimal(i)
                case .double(let d): out.writeEscaped(d.isFinite ? String(d) : "null")
                case .bool(let b): out.write(b ? "true" : "false")
                }
            }
            out.write("}\n")
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<out.used]))
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

/// Writes a log line into memory sized for it (`Log.format` bounds it first): a capacity check
/// and a copy per piece.
struct LineWriter {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var used = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        precondition(used + bytes.count <= buffer.count, "a log line outgrew the bound it was sized by")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        (buffer.baseAddress! + used).copyMemory(from: base, byteCount: bytes.count)
        used += bytes.count
    }

    mutating func write(byte: UInt8) {
        precondition(used < buffer.count, "a log line outgrew the bound it was sized by")
        buffer[used] = byte
        used += 1
    }

    /// A literal's bytes, from where the binary keeps them.
    mutating func write(_ text: StaticString) {
        write(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A string's bytes escaped for a JSON string: copied whole when nothing needs escaping,
    /// as for nearly every field (checked eight bytes at a time).
    mutating func writeEscaped(_ text: String) {
        let copied: Bool? = text.utf8.withContiguousStorageIfAvailable { bytes in
            guard !jsonNeedsEscaping(bytes) else { return false }
            write(UnsafeRawBufferPointer(bytes))
            return true
        }
        guard copied != true else { return }
        Array(text.utf8).withUnsafeBufferPointer { jsonEscape($0) { write(byte: $0) } }
    }

    /// `value` in decimal.
    mutating func writeDecimal(_ value: Int) {
        if value < 0 { write(byte: UInt8(ascii: "-")) }
        var rest = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: any Int's 20 digits
        withUnsafeMutableBytes(of: &digits) { scratch in
            var start = scratch.count
            repeat {
                start -= 1
                scratch[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            write(UnsafeRawBufferPointer(rebasing: scratch[start...]))
        }
    }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T11:30:00.123Z`.
    mutating func writeTimestamp() {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = time_t(ts.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) {
            write(byte: UInt8(48 + v / 10))
            write(byte: UInt8(48 + v % 10))
        }
        writeDecimal(Int(parts.tm_year) + 1900)
        write(byte: UInt8(ascii: "-")); two(parts.tm_mon + 1)
        write(byte: UInt8(ascii: "-")); two(parts.tm_mday)
        write(byte: UInt8(ascii: "T")); two(parts.tm_hour)
        write(byte: UInt8(ascii: ":")); two(parts.tm_min)
        write(byte: UInt8(ascii: ":")); two(parts.tm_sec)
        let ms = Int32(ts.tv_nsec / 1_000_000)
        write(byte: UInt8(ascii: ".")); write(byte: UInt8(48 + ms / 100)); two(ms % 100)
        write(byte: UInt8(ascii: "Z"))
    }
}
