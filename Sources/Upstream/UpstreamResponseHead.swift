import HTTP1

/// The final (non-1xx) response head from the upstream: the field bytes as received and their
/// ranges, so relaying a response makes no String per field. The fields a relay must understand
/// itself (the framing, the hop-by-hop fields) are recognised once, as each arrives, so neither
/// the framing nor the relay looks at a field's name again.
public struct UpstreamResponseHead: Sendable {
    /// What a field is to a relay, told from its name when it is added.
    public typealias Kind = FieldRole

    /// One field: its name and value ranges in `storage`, and what it is.
    public struct Field: Sendable {
        /// The name's bytes in `storage`.
        public let name: Range<Int>
        /// The value's bytes in `storage`, blanks around it trimmed.
        public let value: Range<Int>
        /// What the name says the field is.
        public let kind: Kind
        /// Whether `storage` holds the field as `Name: value\r\n` (one space after the colon), so
        /// that `line` relays it as is.
        public let isCanonical: Bool

        /// The name through the CRLF that follows the value in `storage`.
        public var line: Range<Int> { name.lowerBound..<value.upperBound + 2 }
    }

    /// Status code.
    public var status: Int
    /// Each field's name, the bytes between name and value (`: ` usually), its value and a CRLF,
    /// back to back; `fields` holds the ranges.
    public private(set) var storage: [UInt8] = []
    /// The fields in arrival order.
    public private(set) var fields: [Field] = []
    /// Index of the first `Content-Length` field.
    private var firstContentLength: Int?
    /// The first element of the first `Content-Length` field, which every other must equal.
    private var firstLengthElement: Range<Int>?
    private var contentLengthsDiffer = false
    /// A `Content-Length` element that is no number (`+5`, `0x5`, `5.0`, `5 5`, empty, or more
    /// than 18 digits).
    private var contentLengthMalformed = false
    private(set) var hasTransferEncoding = false
    /// Whether a `Connection` field names a field (anything but `keep-alive` and `close`).
    public private(set) var connectionNamesFields = false

    /// An empty head with `status`.
    public init(status: Int) { self.status = status }

    /// A head with these fields (tests, fetch results).
    public init(status: Int, headers: [(name: String, value: String)]) {
        self.status = status
        for (name, value) in headers { append(name: Array(name.utf8)[...], value: Array(value.utf8)[...]) }
    }

    /// Adds a field.
    public mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        let nameStart = storage.count
        storage.append(contentsOf: name)
        let nameEnd = storage.count
        storage.append(contentsOf: HTTPFieldSyntax.colonSpace.buffer)
        let valueStart = storage.count
        storage.append(contentsOf: value)
        let valueEnd = storage.count
        storage.append(contentsOf: HTTPFieldSyntax.crlf.buffer)
        added(name: nameStart..<nameEnd, value: valueStart..<valueEnd, canonical: true)
    }

    /// Adds a field from a raw header line (libcurl's buffer) in one copy: the name is
    /// `line[..<nameEnd]`, the value `line[valueStart..<valueEnd]`, and what lies between (the
    /// colon and any blanks) is kept, so relaying it is one copy too when that is `": "`. When the
    /// line ends right after the value with its CRLF, that is copied with it.
    mutating func append(line: UnsafeRawBufferPointer, nameEnd: Int, valueStart: Int, valueEnd: Int) {
        let start = storage.count
        let bytes = line.bindMemory(to: UInt8.self)
        if bytes.count == valueEnd + 2 && bytes[valueEnd] == 0x0D && bytes[valueEnd + 1] == 0x0A {
            storage.append(contentsOf: bytes)
        } else {
            storage.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<valueEnd]))
            storage.append(contentsOf: HTTPFieldSyntax.crlf.buffer)
        }
        let canonical =
            valueStart == nameEnd + 2 && bytes[nameEnd] == UInt8(ascii: ":") && bytes[nameEnd + 1] == UInt8(ascii: " ")
        added(name: start..<start + nameEnd, value: start + valueStart..<start + valueEnd, canonical: canonical)
    }

    /// Records a field just stored, and what its name makes it.
    private mutating func added(name: Range<Int>, value: Range<Int>, canonical: Bool) {
        let index = fields.count
        let kind = storage.withUnsafeBufferPointer { bytes in
            let kind = Kind(name: UnsafeBufferPointer(rebasing: bytes[name]))
            switch kind {
            case .endToEnd, .hopByHop: break
            case .transferEncoding: hasTransferEncoding = true
            case .contentLength:
                if firstContentLength == nil { firstContentLength = index }
                noteContentLength(bytes, value)
            case .connection:
                if !connectionNamesFields { connectionNamesFields = Self.namesFields(bytes, connection: value) }
            }
            return kind
        }
        fields.append(Field(name: name, value: value, kind: kind, isCanonical: canonical))
    }

    /// Compares each element of a `Content-Length` value with the first one seen (RFC 9112 §6.3).
    private mutating func noteContentLength(_ bytes: UnsafeBufferPointer<UInt8>, _ value: Range<Int>) {
        var elements = 0
        FieldList.forEachElement(bytes, value) { element in
            elements += 1
            if element.isEmpty || element.count > 18 { contentLengthMalformed = true }
            for i in element where bytes[i] &- 0x30 >= 10 { contentLengthMalformed = true }
            guard let first = firstLengthElement else { firstLengthElement = element; return }
            if first.count != element.count || !bytes[first].elementsEqual(bytes[element]) {
                contentLengthsDiffer = true
            }
        }
        if elements == 0 { contentLengthMalformed = true }  // an empty value
    }

    /// The most fields a response head may have; one with more is not relayed (a 502). Five
    /// times what a client's request head may have (`HTTPHeadLimits.maxHeaderCount`, 100):
    /// responses carry more (a `Set-Cookie` per cookie), and nothing a real upstream sends comes
    /// near it. Without it a head was bounded only by libcurl's total (300 KB, some 50,000 short
    /// fields), which a transfer's head kept as capacity after it ended.
    public static let maxFields = 500

    /// Storage up to this many bytes and room for up to this many fields are kept for the next
    /// head when a transfer ends; a larger head's are given back (`emptied`).
    static let keptBytes = 16 * 1024
    static let keptFields = 64

    /// An empty head that keeps this one's capacity for the next transfer, unless that is more
    /// than an ordinary head needs: a large head's memory is given back, not kept per handle.
    mutating func emptied() {
        if storage.capacity > Self.keptBytes || fields.capacity > Self.keptFields {
            self = UpstreamResponseHead(status: 0)
        } else {
            reset(status: 0)
        }
    }

    /// Forgets every field (a new head begins), keeping the capacity (reserving some at first).
    mutating func reset(status: Int) {
        if storage.capacity == 0 {
            storage.reserveCapacity(512)
            fields.reserveCapacity(16)
        }
        self.status = status
        // Emptied only when not already (the transfer empties its head when it ends): removing
        // nothing still costs a generic replaceSubrange each.
        if !storage.isEmpty { storage.removeAll(keepingCapacity: true) }
        if !fields.isEmpty { fields.removeAll(keepingCapacity: true) }
        firstContentLength = nil
        firstLengthElement = nil
        contentLengthsDiffer = false
        contentLengthMalformed = false
        hasTransferEncoding = false
        connectionNamesFields = false
    }

    /// Header fields as strings, in order.
    public var headers: [(name: String, value: String)] {
        fields.map { (string($0.name), string($0.value)) }
    }

    /// Whether field `index` is called `lowercased` (given in lowercase), ignoring ASCII case.
    public func nameEquals(_ index: Int, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
        let range = fields[index].name
        guard range.count == lowercased.count else { return false }
        return storage.withUnsafeBufferPointer {
            asciiEqualsLowercased(UnsafeBufferPointer(rebasing: $0[range]), lowercased)
        }
    }

    /// The first value of `name` (ASCII case-insensitive).
    public func first(_ name: String) -> String? {
        let wanted = Array(name.utf8).map(asciiLower)
        return wanted.withUnsafeBufferPointer { wanted in fields.indices.first { nameEquals($0, wanted) } }.map {
            string(fields[$0].value)
        }
    }

    /// The first `Content-Length` as a number, when it is one and no `Transfer-Encoding` overrides
    /// it (RFC 9112 §6.3: curl then decodes the chunks and the length means nothing).
    public var contentLength: Int? {
        guard !hasTransferEncoding, let index = firstContentLength else { return nil }
        let digits = storage[fields[index].value]
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 &- 0x30 < 10 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
    }

    /// Whether every `Content-Length` field, and every element of a list in one, says the same
    /// (RFC 9112 §6.3: a response with differing ones is unrecoverable, and a proxy must not relay
    /// it: the client would frame the body by one length while libcurl read it by another).
    public var contentLengthsAgree: Bool { !contentLengthsDiffer }

    /// Whether every `Content-Length` element is a number, unless a `Transfer-Encoding` frames the
    /// body instead (RFC 9112 §6.3: a proxy answers an invalid length with a 502). libcurl reads
    /// `0x5` as 0 and `+5` or `5.0` as 5, or reads to the close when the value overflows: a client
    /// would get an empty or cut body that looked complete.
    public var contentLengthReadable: Bool { !contentLengthMalformed || hasTransferEncoding }

    /// Whether a `Connection` value names any field: an element other than `keep-alive` and
    /// `close` (nginx sends one of those on every response, read here without a pass over elements).
    private static func namesFields(_ bytes: UnsafeBufferPointer<UInt8>, connection value: Range<Int>) -> Bool {
        let whole = UnsafeBufferPointer(rebasing: bytes[value])
        if asciiEqualsLowercased(whole, Names.keepAlive.buffer) || asciiEqualsLowercased(whole, Names.close.buffer) {
            return false
        }
        var names = false
        forEachNamedField(bytes, connection: value) { _ in names = true }
        return names
    }

    /// The field names the `Connection` fields list, lowercased, other than `keep-alive` and
    /// `close` (RFC 9110 §7.6.1: a relay drops them); empty unless `connectionNamesFields`.
    public var connectionNames: [[UInt8]] {
        guard connectionNamesFields else { return [] }
        var names: [[UInt8]] = []
        storage.withUnsafeBufferPointer { bytes in
            for field in fields where field.kind == .connection {
                Self.forEachNamedField(bytes, connection: field.value) { names.append($0.map(asciiLower)) }
            }
        }
        return names
    }

    /// Calls `body` with each element of a `Connection` value that names a field.
    private static func forEachNamedField(
        _ bytes: UnsafeBufferPointer<UInt8>, connection value: Range<Int>,
        _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) {
        FieldList.forEachElement(bytes, value) { range in
            let element = UnsafeBufferPointer(rebasing: bytes[range])
            if !element.isEmpty && !asciiEqualsLowercased(element, Names.keepAlive.buffer)
                && !asciiEqualsLowercased(element, Names.close.buffer)
            {
                body(element)
            }
        }
    }

    private enum Names {
        static let keepAlive = StaticBytes("keep-alive")
        static let close = StaticBytes("close")
    }

    private func string(_ range: Range<Int>) -> String { String(decoding: storage[range], as: UTF8.self) }
}
