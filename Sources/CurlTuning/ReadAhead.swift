import CCurlTuning
import Glibc

/// Bytes read from a TLS upstream socket ahead of OpenSSL, so that one `recv` takes what the
/// socket holds instead of two per TLS record.
///
/// OpenSSL reads a record in two `recv` calls, its 5-byte header and then its body. OpenSSL's own
/// read-ahead cannot stand in: libcurl 7.88 asks OpenSSL whether data is waiting with
/// `SSL_pending`, which counts only a record already decrypted, so records read ahead inside
/// OpenSSL would wake no transfer (and on HTTP/1.1 would hide bytes an upstream sent past a
/// response from every liveness check).
/// A short read (`shortRead`: a header) of a socket curl watches for reading, during a pass,
/// reads up to a block's `capacity` into a block, hands the caller what it asked for and keeps
/// the rest for the socket (`block(of:)`); the next reads of that socket, whoever makes them, are
/// answered from the block first, in order, until it is empty (bench/cost-profile.sh's HTTPS
/// profile counts the `recvfrom` calls per request).
///
/// Bytes held here are invisible to the kernel, so everything that asks the kernel whether a
/// socket has something to read asks here first:
/// - `poll` (`QuietSockets.poll`) reports a socket that holds bytes readable: libcurl gives a
///   socket event to the first transfer on a connection only, and the others ask `poll`;
/// - a socket curl watches for reading gets no event for them, so the pass that left them runs
///   it again at its end while that reads some (`CurlPass.run`), and if it still holds some, the
///   loop's next turn runs it again, as a level-triggered wait would report bytes still in the
///   kernel (`UpstreamClient`'s stalled run); so does a socket curl starts watching for reading
///   again while it holds bytes (a paused transfer resumed);
/// - a socket parked between transfers while it holds bytes is spoiled at its next check (the
///   zero-timeout `poll`, TLS HTTP/1.1's one-byte peek: `QuietSockets`), as one a wait found
///   readable is, and the reaper is called at the parking as a wait's report would call it
///   (`UpstreamClient`, `ConnectionReaper`): bytes no request asked for, such as a response an
///   HTTP/1.1 upstream sent past the last one, never reach the next request if they came before
///   it, and the connection is closed soon after.
///
/// A block belongs to one socket while it holds bytes and goes back to the pass (or is freed) once
/// they are read; curl's closing a socket frees its block (`release`). An idle connection holds
/// none for longer than it takes the reaper to close it.
enum ReadAhead {
    /// A block's size, its header (where its unread bytes begin and end) included.
    static let blockSize = 32 * 1024
    static let headerSize = 16
    /// Bytes one read ahead takes at most: two full TLS records.
    static let capacity = blockSize - headerSize
    /// Reads this long or shorter go through a block: OpenSSL's read of a record's 5-byte header
    /// (and of what is left of one). Longer reads (a record's body, libcurl's plain HTTP reads)
    /// go to the kernel straight into the caller's buffer when nothing is held.
    static let shortRead = 16
    /// Descriptors numbered this high or higher are never read ahead.
    static let tableSize = 1 << 16
    /// Sockets one pass keeps blocks for at most; a short read of another goes to the kernel.
    static let socketsPerPass = 16

    /// Each descriptor's block while it holds bytes, else nil. `calloc`'d, like `QuietSockets.marks`.
    nonisolated(unsafe) static let table: UnsafeMutablePointer<UnsafeMutableRawPointer?> =
        calloc(tableSize, MemoryLayout<UnsafeMutableRawPointer?>.stride)!
        .bindMemory(to: UnsafeMutableRawPointer?.self, capacity: tableSize)

    /// `fd`'s block, if it holds bytes.
    @inline(__always)
    static func block(of fd: CInt) -> UnsafeMutableRawPointer? {
        guard fd >= 0 && Int(fd) < tableSize else { return nil }
        return cc_load_pointer(table + Int(fd))
    }

    /// Bytes `fd` holds.
    static func count(_ fd: CInt) -> Int {
        guard let block = block(of: fd) else { return 0 }
        return Int(end(block) - start(block))
    }

    /// Answers a read of `fd` from `block`: up to `length` bytes, taken unless `peek`. An empty
    /// block leaves the socket.
    static func take(
        from block: UnsafeMutableRawPointer, of fd: CInt, into buffer: UnsafeMutableRawPointer?,
        _ length: Int, peek: Bool
    ) -> Int {
        let first = start(block), available = Int(end(block) - first)
        let count = min(length, available)
        if count > 0, let buffer { memcpy(buffer, data(block) + Int(first), count) }
        guard !peek else { return count }
        if count == available {
            cc_store_pointer(table + Int(fd), nil)
            recycle(block)
        } else {
            setStart(block, first + UInt32(count))
        }
        return count
    }

    /// A short read of `fd` during `pass`: reads what the socket holds, up to `capacity`, hands
    /// the caller up to `length` and keeps the rest for `fd`. Nil when it cannot keep any (the
    /// descriptor is beyond the table, or the pass keeps blocks for as many sockets as it may).
    static func read(_ fd: CInt, into buffer: UnsafeMutableRawPointer?, _ length: Int, pass: CurlPass) -> Int? {
        guard fd >= 0 && Int(fd) < tableSize,
            pass.holding.count < socketsPerPass || pass.holding.contains(fd)
        else { return nil }
        let block = pass.spare ?? malloc(blockSize)!
        pass.spare = nil
        let got = recvfrom(fd, data(block), capacity, 0, nil, nil)
        guard got > 0 else {
            let error = errno
            recycle(block, into: pass)
            errno = error
            return got
        }
        let count = min(got, length)
        if count > 0, let buffer { memcpy(buffer, data(block), count) }
        if count < got {
            setStart(block, UInt32(count))
            setEnd(block, UInt32(got))
            cc_store_pointer(table + Int(fd), block)
            if !pass.holding.contains(fd) { pass.holding.append(fd) }
        } else {
            recycle(block, into: pass)
        }
        return count
    }

    /// curl closes `fd`: its unread bytes go with it.
    static func release(_ fd: CInt) {
        guard let block = block(of: fd) else { return }
        cc_store_pointer(table + Int(fd), nil)
        recycle(block)
    }

    /// An emptied block goes back to the thread's pass, which keeps one; else it is freed.
    private static func recycle(_ block: UnsafeMutableRawPointer) {
        if CurlPass.withCurrent({ recycle(block, into: $0) }) == nil { free(block) }
    }

    private static func recycle(_ block: UnsafeMutableRawPointer, into pass: CurlPass) {
        if pass.spare == nil { pass.spare = block } else { free(block) }
    }

    private static func data(_ block: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer { block + headerSize }
    private static func start(_ block: UnsafeMutableRawPointer) -> UInt32 { block.load(as: UInt32.self) }
    private static func end(_ block: UnsafeMutableRawPointer) -> UInt32 {
        block.load(fromByteOffset: 4, as: UInt32.self)
    }
    private static func setStart(_ block: UnsafeMutableRawPointer, _ value: UInt32) {
        block.storeBytes(of: value, as: UInt32.self)
    }
    private static func setEnd(_ block: UnsafeMutableRawPointer, _ value: UInt32) {
        block.storeBytes(of: value, toByteOffset: 4, as: UInt32.self)
    }
}
