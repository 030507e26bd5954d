import CLinux
import Glibc

/// How many CPUs this process may really use, for `workers: 0`: the CPUs in its affinity mask
/// (`taskset`, Docker `--cpuset-cpus`), capped by a cgroup CPU quota (Docker `--cpus`, a
/// Kubernetes CPU limit), rounded up. A sidecar limited to one CPU on a 64-core node runs one
/// loop, not 64.
public enum CPUBudget {
    /// The CPUs available to this process, at least 1.
    public static func available() -> Int {
        var cpus = Int(cl_affinity_cpu_count())
        if cpus <= 0 { cpus = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
        if let quota = cgroupQuota() { cpus = min(cpus, quota) }
        return max(1, cpus)
    }

    /// The tightest CPU quota over this process's cgroup and its ancestors (cgroup v2), else the
    /// cgroup v1 `cpu` controller's; nil when unlimited or unreadable.
    static func cgroupQuota() -> Int? {
        let membership = read("/proc/self/cgroup")
        if let path = cgroupPath(membership, controller: nil),
            let tightest = ancestors("/sys/fs/cgroup", path).compactMap({
                read($0 + "/cpu.max").flatMap(quota(fromCPUMax:))
            }).min()
        {
            return tightest
        }
        guard let path = cgroupPath(membership, controller: "cpu") else { return nil }
        var quotas: [Int] = []
        for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            for directory in ancestors(mount, path) {
                if let quota = read(directory + "/cpu.cfs_quota_us").flatMap({ Int($0) }),
                    let period = read(directory + "/cpu.cfs_period_us").flatMap({ Int($0) }),
                    let cpus = self.quota(microseconds: quota, period: period)
                {
                    quotas.append(cpus)
                }
            }
        }
        return quotas.min()
    }

    /// `root + path` and each of its parents up to `root`.
    static func ancestors(_ root: String, _ path: String) -> [String] {
        var result: [String] = []
        var directory = root + (path == "/" ? "" : path)
        while true {
            result.append(directory)
            guard directory.count > root.count, let slash = directory.lastIndex(of: "/") else { break }
            directory = String(directory[..<slash])
        }
        return result
    }

    /// The cgroup path in `/proc/self/cgroup`: the unified (v2, `0::`) one when `controller` is
    /// nil, else the v1 hierarchy listing that controller (`4:cpu,cpuacct:/docker/…`).
    static func cgroupPath(_ text: String?, controller: String?) -> String? {
        guard let text else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if let controller {
                if fields[1].split(separator: ",").contains(Substring(controller)) { return String(fields[2]) }
            } else if fields[0] == "0" && fields[1].isEmpty {
                return String(fields[2])
            }
        }
        return nil
    }

    /// CPUs allowed by a cgroup v2 `cpu.max` line (`"max 100000"`, `"150000 100000"`), rounded up.
    static func quota(fromCPUMax text: String) -> Int? {
        let parts = text.split(separator: " ")
        guard parts.count == 2, let quota = Int(parts[0]), let period = Int(parts[1]) else { return nil }
        return self.quota(microseconds: quota, period: period)
    }

    private static func quota(microseconds quota: Int, period: Int) -> Int? {
        guard quota > 0, period > 0 else { return nil }
        return (quota + period - 1) / period
    }

    /// A small file's text without surrounding whitespace, or nil.
    private static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = fread(&buffer, 1, buffer.count - 1, file)
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
