import Glibc
import JSON

/// JSON log lines being composed, in memory of their own that grows as a line needs (a
/// capacity check and a copy per piece; no array append, no String per value). A `LogBuffer`
/// composes each line at the end of the ones it holds; `Log.format` one line alone.
public struct LogLine: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// The capacity it was made with, which `removeAll` goes back to after a burst.
    private let initialCapacity: Int
    /// Bytes written.
    private(set) var count = 0
    /// The second `secondText` ("YYYY-MM-DDTHH:MM:SS") was made for: a line's time is formatted
    /// once a second, not per line.
    private var second = -1
    private var secondText: (UInt64, UInt64, UInt64) = (0, 0, 0)

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        initialCapacity = self.capacity
        base = malloc(self.capacity)!
    }

    deinit { free(base) }

    /// Runs `body` with the bytes written.
    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Forgets what was written; memory grown past `limit` is given back (down to what it was
    /// made with).
    mutating func removeAll(shrinkingAbove limit: Int) {
        count = 0
        guard capacity > limit else { return }
        capacity = initialCapacity
        base = realloc(base, capacity)!
    }

    private mutating func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        capacity = max(capacity * 2, count + n)
        base = realloc(base, capacity)!
    }

    // MARK: a line

    /// Starts a line: `{"time":"…","level":"…","event":"…"`.
    mutating func begin(_ level: LogLevel, _ event: StaticString) {
        writeTimeAndLevel(level)
        write(event)
        write(byte: UInt8(ascii: "\""))
    }

    /// `{"time":"…","level":"…","event":"`.
    private mutating func writeTimeAndLevel(_ level: LogLevel) {
        write("{\"time\":\"")
        writeTimestamp()
        write("\",\"level\":\"")
        write(level.name)
        write("\",\"event\":\"")
    }

    /// Ends a line.
    mutating func end() { write("}\n") }

    /// A whole line of `fields` (keys and event escaped as any string).
    mutating func write(_ level: LogLevel, _ event: String, _ fields: [(String, LogValue)]) {
        writeTimeAndLevel(level)
        writeEscaped(event)
        write(byte: UInt8(ascii: "\""))
        for (key, value) in fields {
            write(",\"")
            writeEscaped(key)
            write("\":")
            switch value {
            case .string(let s): writeQuoted(s)
            case .int(let i): writeDecimal(i)
            case .double(let d): writeEscaped(d.isFinite ? String(d) : "null")
            case .bool(let b): write(b ? "true" : "false")
            }
        }
        end()
    }

    // MARK: fields (keys are literals that need no escaping)

    /// `,"key":"value"`, the value escaped.
    public mutating func field(_ key: StaticString, _ value: String) {
        writeKey(key)
        writeQuoted(value)
    }

    /// `,"key":"value"`, the value escaped.
    public mutating func field(_ key: StaticString, _ value: Substring) {
        writeKey(key)
        var value = value
        value.withUTF8 { writeQuoted($0) }
    }

    /// `,"key":"value"`, the value's bytes escaped.
    public mutating func field(_ key: StaticString, bytes value: UnsafeBufferPointer<UInt8>) {
        writeKey(key)
        writeQuoted(value)
    }

    /// `,"key":"firstsecond"`: two strings joined, each escaped.
    public mutating func field(_ key: StaticString, joining first: String, _ second: String) {
        writeKey(key)
        write(byte: UInt8(ascii: "\""))
        writeEscaped(first)
        writeEscaped(second)
        write(byte: UInt8(ascii: "\""))
    }

    /// `,"key":123`.
    public mutating func field(_ key: StaticString, _ value: Int) {
        writeKey(key)
        writeDecimal(value)
    }

    /// `,"key":1.234`: `thousandths` / 1000 as Swift writes that Double (the fraction without
    /// trailing zeros, at least one digit), without making the Double or its String.
    public mutating func field(_ key: StaticString, thousandths: Int) {
        writeKey(key)
        if thousandths < 0 { write(byte: UInt8(ascii: "-")) }
        let magnitude = thousandths.magnitude
        writeDecimal(Int(magnitude / 1000))
        write(byte: UInt8(ascii: "."))
        var fraction = Int(magnitude % 1000)
        var digits = 3
        while digits > 1 && fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        var divisor = digits == 3 ? 100 : digits == 2 ? 10 : 1
        repeat {
            write(byte: UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        } while divisor > 0
    }

    /// `,"key":`, with one capacity check.
    private mutating func writeKey(_ key: StaticString) {
        assert(key.withUTF8Buffer { !jsonNeedsEscaping($0) }, "a log key is a literal that needs no escaping")
        reserve(key.utf8CodeUnitCount + 4)
        put(byte: UInt8(ascii: ","))
        put(byte: UInt8(ascii: "\""))
        put(UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        put(byte: UInt8(ascii: "\""))
        put(byte: UInt8(ascii: ":"))
    }

    // MARK: pieces

    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        put(bytes)
    }

    mutating func write(byte: UInt8) {
        reserve(1)
        put(byte: byte)
    }

    /// Bytes into room already reserved.
    @inline(__always)
    private mutating func put(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    /// A byte into room already reserved.
    @inline(__always)
    private mutating func put(byte: UInt8) {
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// A literal's bytes, from where the binary keeps them.
    mutating func write(_ text: StaticString) {
        write(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func writeQuoted(_ text: String) {
        var text = text
        text.withUTF8 { writeQuoted($0) }
    }

    /// `"bytes"`, escaped; one capacity check when nothing needs escaping.
    private mutating func writeQuoted(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard !jsonNeedsEscaping(bytes) else {
            write(byte: UInt8(ascii: "\""))
            writeEscaped(bytes)
            return write(byte: UInt8(ascii: "\""))
        }
        reserve(bytes.count + 2)
        put(byte: UInt8(ascii: "\""))
        put(UnsafeRawBufferPointer(bytes))
        put(byte: UInt8(ascii: "\""))
    }

    /// A string's bytes escaped for a JSON string.
    mutating func writeEscaped(_ text: String) {
        var text = text
        text.withUTF8 { writeEscaped($0) }
    }

    /// Bytes escaped for a JSON string: copied whole when nothing needs escaping, as for nearly
    /// every field (checked eight bytes at a time).
    mutating func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard jsonNeedsEscaping(bytes) else { return write(UnsafeRawBufferPointer(bytes)) }
        reserve(6 * bytes.count)
        jsonEscape(bytes) { write(byte: $0) }
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
        if Int(ts.tv_sec) != second {
            second = Int(ts.tv_sec)
            secondText = Self.secondText(ts.tv_sec)
        }
        reserve(24)
        withUnsafeBytes(of: secondText) { put(UnsafeRawBufferPointer(rebasing: $0[..<19])) }
        let ms = Int(ts.tv_nsec / 1_000_000)
        put(byte: UInt8(ascii: "."))
        put(byte: UInt8(48 + ms / 100))
        put(byte: UInt8(48 + ms / 10 % 10))
        put(byte: UInt8(48 + ms % 10))
        put(byte: UInt8(ascii: "Z"))
    }

    /// `YYYY-MM-DDTHH:MM:SS` of `seconds` since the epoch, in UTC (years 0 to 9999).
    private static func secondText(_ seconds: time_t) -> (UInt64, UInt64, UInt64) {
        var t = seconds
        var parts = tm()
        gmtime_r(&t, &parts)
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &text) { out in
            func put(_ value: Int32, at offset: Int, digits: Int) {
                var value = Int(value)
                for i in (0..<digits).reversed() {
                    out[offset + i] = UInt8(48 + value % 10)
                    value /= 10
                }
            }
            put(parts.tm_year + 1900, at: 0, digits: 4)
            out[4] = UInt8(ascii: "-"); put(parts.tm_mon + 1, at: 5, digits: 2)
            out[7] = UInt8(ascii: "-"); put(parts.tm_mday, at: 8, digits: 2)
            out[10] = UInt8(ascii: "T"); put(parts.tm_hour, at: 11, digits: 2)
            out[13] = UInt8(ascii: ":"); put(parts.tm_min, at: 14, digits: 2)
            out[16] = UInt8(ascii: ":"); put(parts.tm_sec, at: 17, digits: 2)
        }
        return text
    }
}
