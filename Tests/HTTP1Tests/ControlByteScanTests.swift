import HTTP1
import Testing

@Suite("Control byte scan")
struct ControlByteScanTests {
    /// The plain loop the word-at-a-time scan must agree with.
    private func reference(_ bytes: [UInt8], from: Int) -> Int {
        var i = from
        while i < bytes.count && bytes[i] >= 0x0E { i += 1 }
        return i
    }

    @Test("the word-at-a-time scan finds the first byte below 0x0E wherever it is, among any other bytes")
    func findsEveryControlByteAtEveryOffset() {
        // Fillers around the control byte: printable text, obs-text (0x80 and up, whose high bit
        // the word test masks), and 0x0E itself, the first byte that is not looked for.
        for filler: UInt8 in [0x41, 0x0E, 0x7F, 0x80, 0xFF] {
            for length in 0..<24 {
                for position in 0...length {
                    for control: UInt8 in 0..<0x0E {
                        var bytes = [UInt8](repeating: filler, count: length)
                        if position < length { bytes[position] = control }
                        for from in 0...min(length, 9) {
                            let found = bytes.withUnsafeBufferPointer { ByteScan.nextControlByte($0, from: from) }
                            #expect(
                                found == reference(bytes, from: from),
                                "filler \(filler) length \(length) control \(control) at \(position) from \(from)")
                        }
                    }
                }
            }
        }
    }

    @Test(
        "a control byte after one in the same word is not reported first, and bytes just above 0x0E never stop the scan"
    )
    func firstOfSeveralAndBorrowNeighbours() {
        // A borrow from a byte below 0x0E can mark the byte above it in the word test: the byte
        // loop after it must still return the first one.
        let bytes: [UInt8] = [0x41, 0x41, 0x0D, 0x0E, 0x0A, 0x41, 0x41, 0x41, 0x41, 0x41]
        #expect(bytes.withUnsafeBufferPointer { ByteScan.nextControlByte($0, from: 0) } == 2)
        #expect(bytes.withUnsafeBufferPointer { ByteScan.nextControlByte($0, from: 3) } == 4)
        let above = [UInt8](repeating: 0x0E, count: 17) + [0x0F, 0x10]
        #expect(above.withUnsafeBufferPointer { ByteScan.nextControlByte($0, from: 0) } == above.count)
    }

    @Test(
        "the word-at-a-time target scan stops where the byte loop over isTarget stops, for every byte at every offset")
    func targetScanAgreesWithTheByteClass() {
        func reference(_ bytes: [UInt8], from: Int) -> Int {
            var i = from
            while i < bytes.count && ByteClass.isTarget(bytes[i]) { i += 1 }
            return i
        }
        // Fillers: allowed bytes at both ends of the range and around `#`, so a carry or borrow
        // from the stopping byte would show in a neighbour.
        for filler: UInt8 in [0x21, 0x22, 0x24, 0x41, 0x7E] {
            for length in [0, 1, 7, 8, 9, 16, 17, 23] {
                for position in 0...length {
                    for stop in 0...255 where position == length || !ByteClass.isTarget(UInt8(stop)) || stop == 0x7E {
                        var bytes = [UInt8](repeating: filler, count: length)
                        if position < length { bytes[position] = UInt8(stop) }
                        for from in [0, 1, min(length, 8)] where from <= length {
                            let found = bytes.withUnsafeBufferPointer { ByteScan.nextNonTargetByte($0, from: from) }
                            #expect(
                                found == reference(bytes, from: from),
                                "filler \(filler) length \(length) byte \(stop) at \(position) from \(from)")
                        }
                    }
                }
            }
        }
    }

    /// The byte loop a word-at-a-time scan must agree with.
    private func firstIndex(_ bytes: [UInt8], from: Int, where stops: (UInt8) -> Bool) -> Int {
        var i = from
        while i < bytes.count && !stops(bytes[i]) { i += 1 }
        return i
    }

    @Test(
        "the word-at-a-time value scan stops where the byte loop over isFieldValue stops, for every byte at every offset"
    )
    func fieldValueScanAgreesWithTheByteClass() {
        // Fillers: just above the controls, a tab (valid, but it stops the word test), just
        // below DEL, and obs-text.
        for filler: UInt8 in [0x20, 0x21, 0x09, 0x7E, 0x80, 0xFF, 0x41] {
            for length in [0, 1, 7, 8, 9, 15, 16, 17, 23] {
                for position in 0...length {
                    for byte in 0...255 {
                        var bytes = [UInt8](repeating: filler, count: length)
                        if position < length { bytes[position] = UInt8(byte) }
                        for from in [0, 1, min(length, 8)] where from <= length {
                            let found = bytes.withUnsafeBufferPointer { ByteScan.nextNonFieldValueByte($0, from: from) }
                            #expect(
                                found == firstIndex(bytes, from: from) { !ByteClass.isFieldValue($0) },
                                "filler \(filler) length \(length) byte \(byte) at \(position) from \(from)")
                        }
                    }
                }
            }
        }
    }
}
