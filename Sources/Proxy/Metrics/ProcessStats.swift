import Glibc

/// The process facts behind the standard `process_*` metrics, read from /proc at scrape time.
struct ProcessStats {
    /// User plus system CPU seconds.
    var cpuSeconds = 0.0
    /// Resident set size in bytes.
    var residentBytes = 0
    /// Open file descriptors.
    var openDescriptors = 0
    /// The soft descriptor limit.
    var maxDescriptors = 0
    /// Unix time the process started, in seconds.
    var startTime = 0.0

    /// Reads the running process's facts; a fact that cannot be read stays 0.
    static func read() -> ProcessStats {
        var stats = ProcessStats()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        // Fields after the parenthesised command name (which may hold spaces): utime is the 14th
        // field of the line, stime the 15th, starttime (ticks since boot) the 22nd.
        if let stat = text("/proc/self/stat"), let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 19, let user = Double(fields[11]), let system = Double(fields[12]),
                let start = Double(fields[19])
            {
                stats.cpuSeconds = (user + system) / ticks
                stats.startTime = bootTime() + start / ticks
            }
        }
        if let statm = text("/proc/self/statm") {
            let fields = statm.split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) {
                stats.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE)))
            }
        }
        stats.openDescriptors = countDescriptors()
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { stats.maxDescriptors = Int(limit.rlim_cur) }
        return stats
    }

    private static func bootTime() -> Double {
        guard let stat = text("/proc/stat") else { return 0 }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).drop(while: { $0 == " " })) ?? 0
        }
        return 0
    }

    private static func countDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        return max(0, count - 1)  // the descriptor opendir itself holds
    }

    /// A small /proc file as text (these files report size 0, so read until the end).
    private static func text(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
