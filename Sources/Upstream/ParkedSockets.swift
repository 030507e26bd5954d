/// Connections parked between transfers, waiting to be known quiet. One parked while the loop
/// ran iteration `p` is known quiet once the batch of a later iteration has been dispatched: that
/// wait began after the parking, so it reported whatever had come on the socket by then (an EOF
/// that came with the last response, as from a server that closes without saying so), and the
/// socket was taken out before anything could ask. Until then libcurl's checks reach the kernel:
/// a connection parked and reused in one loop turn, as with pipelined requests, is asked as before.
struct ParkedSockets {
    private var waiting: [(socket: CurlSocket, parking: UInt32, iteration: Int)] = []

    /// `socket` was parked during iteration `iteration`.
    mutating func add(_ socket: CurlSocket, iteration: Int) {
        waiting.append((socket, socket.parkings, iteration))
    }

    /// Marks quiet the sockets parked before the last dispatched batch's iteration and parked
    /// still (not watched again, closed or reported readable meanwhile).
    mutating func promote(dispatched: Int) {
        guard let first = waiting.first, first.iteration < dispatched else { return }
        var kept = 0
        for i in waiting.indices {
            let entry = waiting[i]
            if entry.iteration < dispatched {
                if entry.socket.parkings == entry.parking, case .parked = entry.socket.state {
                    entry.socket.becameQuiet()
                }
            } else {
                waiting[kept] = entry
                kept += 1
            }
        }
        waiting.removeLast(waiting.count - kept)
    }

    var count: Int { waiting.count }
}
