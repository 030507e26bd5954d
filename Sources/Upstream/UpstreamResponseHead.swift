import HTTP1

/// The final (non-1xx) response head from the upstream: the field bytes as received and their
/// ranges, so relaying a response makes no String per field.
public struct UpstreamResponseHead: Sendable {
    /// Status code.
    public var status: Int
    /// Names and values back to back; `fields` holds their ranges.
    public private(set) var storage: [UInt8] = []
    /// Each field's name and value range in `storage`, in arrival order.
    public private(set) var fields: [(name: Range<Int>, value: Range<Int>)] = []

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
        let valueStart = storage.count
        storage.append(contentsOf: value)
        fields.append((nameStart..<valueStart, valueStart..<storage.count))
    }

    /// Adds a field from a raw header line (libcurl's buffer) in one copy: the name is
    /// `line[..<nameEnd]`, the value `line[valueStart..<line.count]`, and what lies between
    /// (the colon and any blanks) is kept, so relaying it is one copy too when that is `": "`.
    mutating func append(line: UnsafeRawBufferPointer, nameEnd: Int, valueStart: Int) {
        let start = storage.count
        storage.append(contentsOf: line.bindMemory(to: UInt8.self))
        fields.append((start..<start + nameEnd, start + valueStart..<storage.count))
    }

    /// Forgets every field (a new head begins), keeping the capacity (reserving some at first).
    mutating func reset(status: Int) {
        if storage.capacity == 0 {
            storage.reserveCapacity(512)
            fields.reserveCapacity(16)
        }
        self.status = status
        storage.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    /// Header fields as strings, in order.
    public var headers: [(name: String, value: String)] {
        fields.map { (string($0.name), string($0.value)) }
    }

    /// Whether field `index` is called `lowercased` (given in lowercase), ignoring ASCII case.
    public func nameEquals(_ index: Int, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
        let range = fields[index].name
        guard range.count == lowercased.count else { return false }
        return storage.withUnsafeBufferPointer { asciiEqualsLowercased(UnsafeBufferPointer(rebasing: $0[range]), lowercased) }
    }

    /// The first value of `name` (ASCII case-insensitive).
    public func first(_ name: String) -> String? {
        let wanted = Array(name.utf8).map(asciiLower)
        return wanted.withUnsafeBufferPointer { wanted in fields.indices.first { nameEquals($0, wanted) } }.map { string(fields[$0].value) }
    }

    /// The first `Content-Length` as a number, when it is one and no `Transfer-Encoding` overrides
    /// it (RFC 9112 §6.3: curl then decodes the chunks and the length means nothing).
    public var contentLength: Int? {
        // One pass, the names told apart by length first.
        var found: Int?
        for i in fields.indices {
            switch fields[i].name.count {
            case Self.transferEncodingName.count where nameEquals(i, Self.transferEncodingName.buffer): return nil
            case Self.contentLengthName.count where found == nil && nameEquals(i, Self.contentLengthName.buffer): found = i
            default: continue
            }
        }
        guard let index = found else { return nil }
        let digits = storage[fields[index].value]
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 &- 0x30 < 10 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
    }

    /// Whether every `Content-Length` field, and every element of a list in one, says the same
    /// (RFC 9112 §6.3: a response with differing ones is unrecoverable, and a proxy must not relay
    /// it: the client would frame the body by one length while libcurl read it by another).
    public var contentLengthsAgree: Bool {
        storage.withUnsafeBufferPointer { bytes in
            var first: UnsafeBufferPointer<UInt8>?
            var agree = true
            for i in fields.indices where fields[i].name.count == Self.contentLengthName.count
                && asciiEqualsLowercased(UnsafeBufferPointer(rebasing: bytes[fields[i].name]), Self.contentLengthName.buffer) {
                // Each element of the field's list; the usual field is one element.
                FieldList.forEachElement(bytes, fields[i].value) { range in
                    let element = UnsafeBufferPointer(rebasing: bytes[range])
                    if let first {
                        if first.count != element.count || !first.elementsEqual(element) { agree = false }
                    } else {
                        first = element
                    }
                }
                if !agree { return false }
            }
            return true
        }
    }

    private static let contentLengthName = StaticBytes("content-length")
    private static let transferEncodingName = StaticBytes("transfer-encoding")

    private func string(_ range: Range<Int>) -> String { String(decoding: storage[range], as: UTF8.self) }
}
