import Testing

@testable import Proxy

/// A server frame (unmasked unless `mask`), FIN set, with a payload of `length` zero bytes and the
/// shortest length encoding (7, 16 or 64 bits) unless `wide` asks for the 64-bit one.
private func frame(_ length: Int, opcode: UInt8 = 0x2, fin: Bool = true, mask: Bool = false, wide: Bool = false)
    -> [UInt8]
{
    var bytes: [UInt8] = [(fin ? 0x80 : 0) | opcode]
    let maskBit: UInt8 = mask ? 0x80 : 0
    if length < 126 && !wide {
        bytes.append(maskBit | UInt8(length))
    } else if length < 65536 && !wide {
        bytes += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
    } else {
        bytes.append(maskBit | 127)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((length >> shift) & 0xFF)) }
    }
    if mask { bytes += [1, 2, 3, 4] }
    return bytes + [UInt8](repeating: 0, count: length)
}

/// (the stream, the sizes it is cut into, the boundaries expected after each piece).
private let splits: [([UInt8], [Int], [Bool])] = [
    // Whole frames of each length encoding, one at a time.
    (frame(5), [7], [true]),
    (frame(0, opcode: 0x9), [2], [true]),
    (frame(300), [304], [true]),
    (frame(70000), [70010], [true]),
    (frame(200, wide: true), [210], [true]),
    (frame(10, mask: true), [16], [true]),
    // A head cut anywhere is no boundary until its payload ends.
    (frame(300), [1, 1, 1, 1, 300], [false, false, false, false, true]),
    (frame(70000), [1, 5, 4, 69999, 1], [false, false, false, false, true]),
    (frame(0), [1, 1], [false, true]),
    // Several frames in one piece, and a piece ending inside the second one.
    (frame(3) + frame(126) + frame(2), [5 + 130 + 4], [true]),
    (frame(3) + frame(126), [5 + 10, 120], [false, true]),
    // A fragmented message with a ping between its fragments: every frame ends a boundary.
    (frame(4, fin: false) + frame(1, opcode: 0x9) + frame(4, opcode: 0x0), [6, 3, 6], [true, true, true]),
]

@Test(arguments: splits.indices)
func webSocketFrameBoundaries(_ index: Int) {
    let (stream, pieces, boundaries) = splits[index]
    #expect(pieces.reduce(0, +) == stream.count, "row \(index): the pieces cover the stream")
    var cursor = WebSocketFrameCursor()
    var offset = 0
    for (n, size) in pieces.enumerated() {
        #expect(cursor.advance(over: stream[offset..<offset + size]) == size, "row \(index), piece \(n)")
        offset += size
        #expect(cursor.atBoundary == boundaries[n], "row \(index), piece \(n)")
    }
}

/// (bytes already read, the next piece, what `stopAtBoundary` takes of it, at a boundary after).
private let stops: [([UInt8], [UInt8], Int, Bool)] = [
    // At a boundary already: nothing more is taken.
    ([], frame(3), 0, true),
    (frame(3), frame(3), 0, true),
    // Inside a payload: up to its end, not into the next frame.
    (Array(frame(100)[0..<50]), Array(frame(100)[50...]) + frame(3), 52, true),
    // Inside a head: the rest of the head and the payload.
    (Array(frame(300)[0..<2]), Array(frame(300)[2...]) + frame(1), 302, true),
    // The piece ends before the frame does: all of it, still inside the frame.
    (Array(frame(1000)[0..<4]), Array(frame(1000)[4..<600]), 596, false),
]

@Test(arguments: stops.indices)
func webSocketFrameStopsAtTheBoundary(_ index: Int) {
    let (before, piece, taken, boundary) = stops[index]
    var cursor = WebSocketFrameCursor()
    cursor.advance(over: before[...])
    #expect(cursor.advance(over: piece[...], stopAtBoundary: true) == taken, "row \(index)")
    #expect(cursor.atBoundary == boundary, "row \(index)")
}
