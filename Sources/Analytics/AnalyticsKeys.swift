import Glibc
import HTTP1

/// Builds and checks analytics keys: dot paths `root.feature.sub…`.
///
/// Rules: `root` is prefixed unless the key already is `root` or starts with
/// `root.`; spaces become `_`; empty segments (`a..b`, a leading or trailing
/// dot) and control characters are rejected; keys over ``maxKeyBytes`` bytes of
/// UTF-8, counted after normalisation, are rejected.
public struct AnalyticsKeys: Sendable {
    /// The prefix of every key ("pennmobile"); validated by the config loader.
    public let root: String

    /// The default longest key, in UTF-8 bytes.
    public static let maxBytes = 256
    /// Longest accepted key, in UTF-8 bytes (`analytics.maxKeyBytes`).
    public let maxKeyBytes: Int

    /// Keys under `root`, at most `maxKeyBytes` long.
    public init(root: String, maxKeyBytes: Int = AnalyticsKeys.maxBytes) {
        self.root = root
        self.maxKeyBytes = maxKeyBytes
    }

    /// `raw` as a full key: spaces replaced, root-prefixed, checked.
    public func normalize(_ raw: String) -> Result<String, AnalyticsKeyError> {
        Result { () throws(AnalyticsKeyError) in try limited(prefixed(cleanPath(raw, field: "key")), field: "key") }
    }

    /// `<root>.<path>.event.<event>`; `event` is a single segment.
    public func eventKey(path: String, event: String) -> Result<String, AnalyticsKeyError> {
        if let key = plainEventKey(path: path, event: event) { return .success(key) }
        return cleanedEventKey(path: path, event: event)
    }

    /// `eventKey` by the general rules: spaces rewritten, every problem named.
    func cleanedEventKey(path: String, event: String) -> Result<String, AnalyticsKeyError> {
        Result { () throws(AnalyticsKeyError) in
            let path = try prefixed(cleanPath(path, field: "path"))
            let event = try cleanName(event, field: "event")
            return try limited("\(path).event.\(event)", field: "path and event")
        }
    }

    /// `<root>.<path>.operation.<operation>`, or `<root>.global.operation.<operation>`
    /// when `path` is nil or empty; `operation` is a single segment.
    public func operationKey(path: String?, operation: String) -> Result<String, AnalyticsKeyError> {
        operationSearch(path: path, operation: operation).map { $0[0] }
    }

    /// The candidate keys for finish/cancel, most specific first: the path's own
    /// operation key, then each parent's up to the root's, then global.
    public func operationSearch(path: String?, operation: String) -> Result<[String], AnalyticsKeyError> {
        Result { () throws(AnalyticsKeyError) in
            let name = try cleanName(operation, field: "operation")
            let global = try limited("\(root).global.operation.\(name)", field: "operation")
            guard let path, !path.isEmpty else { return [global] }
            let full = try prefixed(cleanPath(path, field: "path"))
            let relative =
                full.utf8.elementsEqual(root.utf8)
                ? []
                : full.utf8.dropFirst(root.utf8.count + 1)
                    .split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
                    .map { String(decoding: $0, as: UTF8.self) }
            var keys: [String] = []
            for depth in stride(from: relative.count, through: 0, by: -1) {
                let parent = ([root] + relative[..<depth]).joined(separator: ".")
                keys.append("\(parent).operation.\(name)")
            }
            // The most specific key is the longest: checking it covers its parents.
            _ = try limited(keys[0], field: "path and operation")
            if !keys.contains(global) { keys.append(global) }
            return keys
        }
    }
}

extension AnalyticsKeys {
    /// The event key built in one pass over the bytes when nothing needs the general path of
    /// `eventKey`: the path and the event are non-empty and hold no control byte, DEL or space,
    /// the path no empty segment, the event no dot, and the key fits. Nil otherwise: the general
    /// path then rewrites spaces or names the problem. Every event of a busy app takes this one.
    func plainEventKey(path: String, event: String) -> String? {
        path.withUTF8Bytes { path in
            event.withUTF8Bytes { event in
                root.withUTF8Bytes { root in
                    guard let first = path.first, let last = path.last, !event.isEmpty, !root.isEmpty,
                        first != UInt8(ascii: "."), last != UInt8(ascii: ".")
                    else { return nil }
                    var previous: UInt8 = 0
                    for b in path {
                        if b <= 0x20 || b == 0x7F || (b == UInt8(ascii: ".") && previous == b) { return nil }
                        previous = b
                    }
                    for b in event where b <= 0x20 || b == 0x7F || b == UInt8(ascii: ".") { return nil }
                    // Under the root unless it is the root or below it, as `prefixed`.
                    let underRoot =
                        path.count >= root.count && memcmp(path.baseAddress!, root.baseAddress!, root.count) == 0
                        && (path.count == root.count || path[root.count] == UInt8(ascii: "."))
                    let prefix = underRoot ? 0 : root.count + 1
                    let infix: StaticString = ".event."
                    let total = prefix + path.count + infix.utf8CodeUnitCount + event.count
                    guard total <= maxKeyBytes else { return nil }
                    return String(unsafeUninitializedCapacity: total) { out in
                        var at = 0
                        func put(_ bytes: UnsafeBufferPointer<UInt8>) {
                            UnsafeMutableRawPointer(out.baseAddress! + at).copyMemory(
                                from: bytes.baseAddress!, byteCount: bytes.count)
                            at += bytes.count
                        }
                        if !underRoot {
                            put(root)
                            out[at] = UInt8(ascii: ".")
                            at += 1
                        }
                        put(path)
                        put(UnsafeBufferPointer(start: infix.utf8Start, count: infix.utf8CodeUnitCount))
                        put(event)
                        return at
                    }
                }
            }
        }
    }

    /// Spaces to `_`, then no control characters and no empty segments; no prefix, no length check.
    private func cleanPath(_ raw: String, field: String) throws(AnalyticsKeyError) -> String {
        let key = try cleanName(raw, field: field, allowDots: true)
        let segments = key.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.contains(where: \.isEmpty) else { return key }
        if key.utf8.first == UInt8(ascii: ".") { throw AnalyticsKeyError(field, "starts with \".\"") }
        if key.utf8.last == UInt8(ascii: ".") { throw AnalyticsKeyError(field, "ends with \".\"") }
        throw AnalyticsKeyError(field, "has an empty segment (\"..\")")
    }

    /// One segment (an event or operation name), or with `allowDots` the raw text of a path.
    private func cleanName(_ raw: String, field: String, allowDots: Bool = false) throws(AnalyticsKeyError) -> String {
        if raw.isEmpty { throw AnalyticsKeyError(field, "is empty") }
        if raw.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw AnalyticsKeyError(field, "contains a control character")
        }
        if !allowDots, raw.utf8.contains(UInt8(ascii: ".")) {
            // A dotted name would make `a.operation.b.c` ambiguous with path `a.operation.b`.
            throw AnalyticsKeyError(field, "must be a single segment, without \".\"")
        }
        guard raw.utf8.contains(UInt8(ascii: " ")) else { return raw }
        return String(decoding: raw.utf8.map { $0 == UInt8(ascii: " ") ? UInt8(ascii: "_") : $0 }, as: UTF8.self)
    }

    /// `key` under the root, unless it already is the root or below it (compared byte-wise).
    private func prefixed(_ key: String) -> String {
        if key.utf8.elementsEqual(root.utf8) { return key }
        if key.utf8.starts(with: root.utf8), key.utf8.dropFirst(root.utf8.count).first == UInt8(ascii: ".") {
            return key
        }
        return "\(root).\(key)"
    }

    private func limited(_ key: String, field: String) throws(AnalyticsKeyError) -> String {
        let bytes = key.utf8.count
        if bytes > maxKeyBytes {
            throw AnalyticsKeyError(
                field, "the key is \(bytes) bytes after normalisation; the limit is \(maxKeyBytes)")
        }
        return key
    }
}

/// Why a key was refused; `message` starts with the field ("path: is empty").
public struct AnalyticsKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, for a 400 body.
    public let message: String

    /// An error with this message.
    public init(message: String) {
        self.message = message
    }

    init(_ field: String, _ problem: String) {
        message = "\(field): \(problem)"
    }

    /// The message.
    public var description: String { message }
}
