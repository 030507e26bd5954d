import HTTP1

extension UpstreamResponseHead {
    /// Whether the response is an event stream (`Content-Type: text/event-stream`, parameters
    /// allowed): quiet between events for long, so its stall limit is its own
    /// (`UpstreamRequest.eventStreamIdleTimeout`). A length-framed response is never one.
    var isEventStream: Bool {
        guard contentLength == nil else { return false }
        return Self.contentTypeName.withUnsafeBufferPointer { name in
            guard let index = fields.indices.first(where: { nameEquals($0, name) }) else { return false }
            let value = storage[fields[index].value]
            let wanted = Self.eventStreamType
            guard value.count >= wanted.count else { return false }
            for (offset, byte) in zip(value.indices, wanted) where asciiLower(value[offset]) != byte { return false }
            return value.count == wanted.count || value[value.startIndex + wanted.count] == UInt8(ascii: ";")
                || value[value.startIndex + wanted.count] == UInt8(ascii: " ")
        }
    }

    private static let contentTypeName = Array("content-type".utf8)
    private static let eventStreamType = Array("text/event-stream".utf8)
}
