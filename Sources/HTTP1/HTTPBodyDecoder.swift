/// What one decoding step found.
public enum BodyDecodeEvent: Sendable, Equatable {
    /// Body bytes at this range of the buffer passed in.
    case data(Range<Int>)
    /// The body is complete.
    case end
    /// Every byte passed in was consumed; more are needed.
    case needMore
    /// The body is malformed; answer 400 and close.
    case invalid(HTTPParseError)
}

/// Incremental, zero-copy body decoder for Content-Length, chunked and close-delimited framing.
///
/// Call `decode` with the unconsumed bytes; it returns how many it consumed and one event.
/// Chunk framing is checked byte by byte: sizes are hex only, extensions are `;name[=value]`,
/// data must be followed by exactly CRLF, bare CR or LF anywhere is refused.
public struct HTTPBodyDecoder: Sendable {
    private enum State: Sendable, Equatable {
        case length(remaining: Int)
        case untilClose
        case chunkSize(value: UInt64, digits: Int)
        case chunkExtension(ExtensionState, length: Int, size: UInt64)
        case chunkSizeLF(size: UInt64)
        case chunkData(remaining: Int)
        case chunkDataCR
        case chunkDataLF
        case trailerLineStart
        case trailerLine(sawColon: Bool, inName: Bool)
        case trailerLF
        case finalLF
        case done
    }

    enum ExtensionState: Sendable, Equatable {
        case nameStart, name, valueStart, token, quoted, quotedEscape, afterQuoted
    }

    private var state: State
    private var trailerBytes = 0
    /// Most bytes of chunk extensions per chunk line, and of all trailers together.
    public let maxExtensionBytes: Int
    /// Most bytes of trailer fields.
    public let maxTrailerBytes: Int

    /// Creates a decoder for `framing`.
    public init(framing: BodyFraming, maxExtensionBytes: Int = 4096, maxTrailerBytes: Int = 32768) {
        switch framing {
        case .none: state = .done
        case .length(let n): state = n == 0 ? .done : .length(remaining: n)
        case .chunked: state = .chunkSize(value: 0, digits: 0)
        case .untilClose: state = .untilClose
        }
        self.maxExtensionBytes = maxExtensionBytes
        self.maxTrailerBytes = maxTrailerBytes
    }

    /// Whether the body has ended.
    public var isComplete: Bool { state == .done }

    /// The peer closed: a close-delimited body ends, any other unfinished body was truncated.
    public mutating func peerClosed() -> BodyDecodeEvent {
        switch state {
        case .done: return .end
        case .untilClose: state = .done; return .end
        default: return .invalid(.missingChunkTerminator)
        }
    }

    /// Decodes from the start of `buffer`; returns the bytes consumed and what was found.
    public mutating func decode(_ buffer: UnsafeRawBufferPointer) -> (consumed: Int, event: BodyDecodeEvent) {
        let bytes = buffer.bindMemory(to: UInt8.self)
        var i = 0
        while true {
            switch state {
            case .done:
                return (i, .end)
            case .length(let remaining):
                guard i < bytes.count else { return (i, .needMore) }
                let n = min(remaining, bytes.count - i)
                state = n == remaining ? .done : .length(remaining: remaining - n)
                return (i + n, .data(i..<(i + n)))
            case .untilClose:
                guard i < bytes.count else { return (i, .needMore) }
                return (bytes.count, .data(i..<bytes.count))
            case .chunkData(let remaining):
                guard i < bytes.count else { return (i, .needMore) }
                let n = min(remaining, bytes.count - i)
                state = n == remaining ? .chunkDataCR : .chunkData(remaining: remaining - n)
                return (i + n, .data(i..<(i + n)))
            default:
                guard i < bytes.count else { return (i, .needMore) }
                if let error = step(bytes[i]) { return (i, .invalid(error)) }
                i += 1
            }
        }
    }

    /// Advances the framing states by one byte.
    private mutating func step(_ b: UInt8) -> HTTPParseError? {
        switch state {
        case .chunkSize(let value, let digits):
            if let d = ByteClass.hexValue(b) {
                guard value < 1 << 58 else { return .chunkSizeOverflow }
                state = .chunkSize(value: value << 4 | d, digits: digits + 1)
                return nil
            }
            guard digits > 0 else { return .invalidChunkSize }
            return endOfSize(b, value: value)
        case .chunkExtension(let ext, let length, let size):
            guard length < maxExtensionBytes else { return .chunkExtensionTooLong }
            if b == .cr {
                guard ext == .name || ext == .token || ext == .afterQuoted else { return .invalidChunkExtension }
                state = .chunkSizeLF(size: size)
                return nil
            }
            guard let next = Self.extensionStep(ext, b) else { return .invalidChunkExtension }
            state = .chunkExtension(next, length: length + 1, size: size)
            return nil
        case .chunkSizeLF(let size):
            guard b == .lf else { return .bareCR }
            state = size == 0 ? .trailerLineStart : .chunkData(remaining: Int(size))
            return nil
        case .chunkDataCR:
            guard b == .cr else { return .missingChunkTerminator }
            state = .chunkDataLF
            return nil
        case .chunkDataLF:
            guard b == .lf else { return .missingChunkTerminator }
            state = .chunkSize(value: 0, digits: 0)
            return nil
        case .trailerLineStart:
            if b == .cr { state = .finalLF; return nil }
            guard ByteClass.isToken(b) else { return .invalidTrailer }
            state = .trailerLine(sawColon: false, inName: true)
            return countTrailer()
        case .trailerLine(let sawColon, let inName):
            if b == .cr {
                guard sawColon else { return .invalidTrailer }
                state = .trailerLF
                return nil
            }
            if inName {
                if b == .colon {
                    state = .trailerLine(sawColon: true, inName: false)
                } else if !ByteClass.isToken(b) {
                    return .invalidTrailer
                }
            } else if !ByteClass.isFieldValue(b) {
                return .invalidTrailer
            }
            return countTrailer()
        case .trailerLF:
            guard b == .lf else { return .bareCR }
            state = .trailerLineStart
            return nil
        case .finalLF:
            guard b == .lf else { return .bareCR }
            state = .done
            return nil
        case .length, .untilClose, .chunkData, .done:
            preconditionFailure("data states are handled by decode")
        }
    }

    private mutating func endOfSize(_ b: UInt8, value: UInt64) -> HTTPParseError? {
        switch b {
        case .cr:
            state = .chunkSizeLF(size: value)
            return nil
        case .semicolon:
            state = .chunkExtension(.nameStart, length: 0, size: value)
            return nil
        default:
            return .invalidChunkSize
        }
    }

    private mutating func countTrailer() -> HTTPParseError? {
        trailerBytes += 1
        return trailerBytes > maxTrailerBytes ? .trailerTooLarge : nil
    }

    /// `chunk-ext = *( ";" token [ "=" ( token / quoted-string ) ] )`, without optional whitespace.
    private static func extensionStep(_ s: ExtensionState, _ b: UInt8) -> ExtensionState? {
        let isToken = ByteClass.isToken(b)
        switch s {
        case .nameStart: return isToken ? .name : nil
        case .name:
            if isToken { return .name }
            if b == UInt8(ascii: "=") { return .valueStart }
            return b == .semicolon ? .nameStart : nil
        case .valueStart:
            if b == UInt8(ascii: "\"") { return .quoted }
            return isToken ? .token : nil
        case .token:
            if isToken { return .token }
            return b == .semicolon ? .nameStart : nil
        case .quoted:
            if b == UInt8(ascii: "\"") { return .afterQuoted }
            if b == UInt8(ascii: "\\") { return .quotedEscape }
            return ByteClass.isFieldValue(b) ? .quoted : nil
        case .quotedEscape:
            return ByteClass.isFieldValue(b) ? .quoted : nil
        case .afterQuoted:
            return b == .semicolon ? .nameStart : nil
        }
    }
}
