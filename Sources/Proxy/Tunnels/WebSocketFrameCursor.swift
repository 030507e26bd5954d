/// Where a WebSocket byte stream is between frames (RFC 6455 §5.2), so the proxy's own close
/// frame goes in only at a frame boundary: a close frame in the middle of a frame the upstream is
/// sending would be read by the client as part of that frame's payload. It reads the frame heads
/// only (FIN and opcode byte, the mask bit and the 7-bit, 16-bit or 64-bit payload length, a mask
/// key if one is set) and steps over payloads whole, so a chunk costs a few steps per frame head,
/// not per byte. Control frames may come between the fragments of a message (§5.4): any frame
/// boundary takes a close frame.
struct WebSocketFrameCursor: Equatable {
    private enum Phase: Equatable {
        /// Reading a frame head: `seen` of its bytes so far, `size` of them in all (2 until the
        /// second byte tells the length's and the mask's size).
        case head(seen: Int, size: Int)
        /// Inside a frame's payload, `left` bytes of it still to come.
        case payload(left: UInt64)
    }

    private var phase = Phase.head(seen: 0, size: 2)
    /// The payload length being read from the head.
    private var length: UInt64 = 0
    /// The bytes of the head that hold the extended length (0, 2 or 8).
    private var extended = 0

    /// Whether the bytes so far end a frame (or none came).
    var atBoundary: Bool { phase == .head(seen: 0, size: 2) }

    /// Steps over `bytes`, the next bytes of the stream, and returns how many it took: all of
    /// them, or with `stopAtBoundary` only those up to the first frame boundary they reach (none
    /// when the cursor is already at one).
    @discardableResult
    mutating func advance(over bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool = false) -> Int {
        var index = 0
        while index < bytes.count {
            if stopAtBoundary && atBoundary { return index }
            switch phase {
            case .payload(let left):
                let step = min(UInt64(bytes.count - index), left)
                index += Int(step)
                phase = step == left ? .head(seen: 0, size: 2) : .payload(left: left - step)
            case .head(let seen, var size):
                let byte = bytes[index]
                index += 1
                if seen == 1 {
                    let code = byte & 0x7F
                    extended = code == 126 ? 2 : code == 127 ? 8 : 0
                    length = extended == 0 ? UInt64(code) : 0
                    size = 2 + extended + (byte & 0x80 != 0 ? 4 : 0)
                } else if seen >= 2 && seen < 2 + extended {
                    length = length << 8 | UInt64(byte)
                }
                if seen + 1 < size {
                    phase = .head(seen: seen + 1, size: size)
                } else {
                    phase = length == 0 ? .head(seen: 0, size: 2) : .payload(left: length)
                }
            }
        }
        return index
    }

    /// Steps over `bytes` (an array), as `advance(over:stopAtBoundary:)`.
    @discardableResult
    mutating func advance(over bytes: ArraySlice<UInt8>, stopAtBoundary: Bool = false) -> Int {
        bytes.withUnsafeBytes { advance(over: $0, stopAtBoundary: stopAtBoundary) }
    }
}
