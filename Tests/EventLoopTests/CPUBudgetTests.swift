import Testing

@testable import EventLoop

@Suite("CPUBudget")
struct CPUBudgetTests {
    @Test(
        "a cgroup v2 cpu.max quota is rounded up to whole CPUs; max means unlimited",
        arguments: [
            ("max 100000", nil), ("100000 100000", 1), ("150000 100000", 2), ("50000 100000", 1),
            ("400000 100000", 4), ("", nil), ("garbage", nil), ("0 100000", nil),
        ] as [(String, Int?)])
    func cpuMax(text: String, expected: Int?) {
        #expect(CPUBudget.quota(fromCPUMax: text) == expected)
    }

    @Test("the unified and the v1 cpu hierarchy are found in /proc/self/cgroup")
    func membership() {
        let hybrid = "9:name=systemd:/\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/\n0::/kubepods/pod1/c2\n"
        #expect(CPUBudget.cgroupPath(hybrid, controller: nil) == "/kubepods/pod1/c2")
        #expect(CPUBudget.cgroupPath(hybrid, controller: "cpu") == "/docker/abc")
        #expect(CPUBudget.cgroupPath(hybrid, controller: "cpuset") == "/")
        #expect(CPUBudget.cgroupPath("4:cpuacct:/x\n", controller: "cpu") == nil)
        #expect(CPUBudget.cgroupPath(nil, controller: nil) == nil)
    }

    @Test("a cgroup's quota is looked up on it and every ancestor up to the mount")
    func ancestors() {
        #expect(
            CPUBudget.ancestors("/sys/fs/cgroup", "/a/b") == [
                "/sys/fs/cgroup/a/b", "/sys/fs/cgroup/a", "/sys/fs/cgroup",
            ])
        #expect(CPUBudget.ancestors("/sys/fs/cgroup", "/") == ["/sys/fs/cgroup"])
    }

    @Test("this machine's budget is at least one CPU and at most its online CPUs")
    func available() {
        let cpus = CPUBudget.available()
        #expect(cpus >= 1)
        #expect(cpus <= 4096)
    }
}
