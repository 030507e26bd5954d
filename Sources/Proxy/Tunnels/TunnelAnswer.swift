import HTTP1

/// The upstream's answer to an upgrade request, read off a tunnel's connection: where its head
/// ends, its status, and a refusal (any status but 101) read whole to be relayed as a response.
enum TunnelAnswer {
    /// Largest answer head accepted.
    static let maxHead = 65536
    /// Largest refusal body relayed; past it the body is cut there.
    static let maxRefusalBody = 1_048_576

    /// The offset just past the head's blank line, once it arrived.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count
        where bytes[i] == 0x0A && bytes[i - 1] == 0x0D && bytes[i - 2] == 0x0A && bytes[i - 3] == 0x0D {
            return i + 1
        }
        return nil
    }

    /// Drops the interim heads (1xx but 101) that start `bytes` and arrived whole: an upstream may
    /// send some (`103 Early Hints`) before its answer (RFC 9110 §15.2), which is the head after
    /// them; relayed as the answer, a 1xx would leave the client waiting for a final one.
    static func droppingInterim(_ bytes: inout [UInt8]) {
        while let end = headEnd(bytes), let status = status(bytes), (100...199).contains(status), status != 101 {
            bytes.removeSubrange(0..<end)
        }
    }

    /// The status of an `HTTP/1.x NNN` status line.
    static func status(_ bytes: [UInt8]) -> Int? {
        let prefix = Array("HTTP/1.".utf8)
        guard bytes.count >= 12, Array(bytes[0..<7]) == prefix, bytes[8] == 0x20 else { return nil }
        let digits = bytes[9..<12]
        guard digits.allSatisfy({ $0 &- 0x30 < 10 }), bytes.count == 12 || bytes[12] == 0x20 || bytes[12] == 0x0D else {
            return nil
        }
        return digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
    }

    /// The head fields as name/value pairs (obs-fold and malformed lines skipped).
    static func fields(_ head: ArraySlice<UInt8>) -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        let lines = head.split(separator: 0x0A, omittingEmptySubsequences: true).dropFirst()
        for var line in lines {
            if line.last == 0x0D { line = line.dropLast() }
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex, line.first != 0x20, line.first != 0x09
            else { continue }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingSpaces
            out.append((name, value))
        }
        return out
    }

    /// A refused upgrade being read: head, then the body by its framing.
    struct Refusal {
        let status: Int
        /// The fields relayed: framing and hop-by-hop ones (and those `Connection` names) dropped.
        let headers: [(name: String, value: String)]
        private(set) var body: [UInt8] = []
        private var decoder: HTTPBodyDecoder
        private var pending: [UInt8] = []
        private(set) var isComplete = false

        /// Starts from the bytes read so far (the whole head, perhaps some body).
        init(_ bytes: [UInt8]) {
            let end = TunnelAnswer.headEnd(bytes) ?? bytes.count
            status = TunnelAnswer.status(bytes) ?? 502
            let all = TunnelAnswer.fields(bytes[0..<end])
            var named: Set<String> = [
                "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
                "proxy-connection", "te", "trailer", "proxy-authenticate",
            ]
            var framing: BodyFraming = .untilClose
            for (name, value) in all {
                let lower = name.lowercased()
                if lower == "connection" {
                    for token in value.split(separator: ",") { named.insert(String(token).trimmingSpaces.lowercased()) }
                }
                if lower == "transfer-encoding",
                    value.lowercased().split(separator: ",").contains(where: { $0.trimmingCharacters() == "chunked" })
                {
                    framing = .chunked
                }
                if lower == "content-length", framing != .chunked, let n = Int(value), n >= 0 { framing = .length(n) }
            }
            if status == 204 || status == 304 || (100...199).contains(status) { framing = .none }
            headers = all.filter { !named.contains($0.name.lowercased()) }
            decoder = HTTPBodyDecoder(framing: framing)
            isComplete = decoder.isComplete
            append(bytes[end...].withUnsafeBytes { Array($0) })
        }

        /// More bytes of the body.
        mutating func append(_ bytes: UnsafeRawBufferPointer) { append(Array(bytes)) }

        private mutating func append(_ bytes: [UInt8]) {
            guard !isComplete else { return }
            pending.append(contentsOf: bytes)
            while !isComplete {
                let (consumed, event) = pending.withUnsafeBytes { decoder.decode($0) }
                switch event {
                case .data(let range):
                    if body.count < TunnelAnswer.maxRefusalBody {
                        body.append(contentsOf: pending[range].prefix(TunnelAnswer.maxRefusalBody - body.count))
                    }
                    pending.removeFirst(consumed)
                case .end:
                    pending.removeFirst(consumed)
                    isComplete = true
                case .needMore:
                    pending.removeFirst(consumed)
                    return
                case .invalid:
                    isComplete = true
                }
            }
        }

        /// The upstream closed: the body ends here.
        mutating func upstreamEnded() { isComplete = true }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String { String(self).trimmingSpaces }
}
