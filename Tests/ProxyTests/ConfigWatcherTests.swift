import Glibc
import Testing
@testable import Proxy

@Suite("ConfigWatcher events")
struct ConfigWatcherTests {
    /// One `struct inotify_event` record for `name` (padded to a multiple of 4 like the kernel's).
    private func record(_ name: String?, mask: Int32 = Int32(IN_MODIFY)) -> [UInt8] {
        var event = inotify_event()
        event.wd = 1
        event.mask = UInt32(mask)
        var nameBytes: [UInt8] = name.map { Array($0.utf8) + [0] } ?? []
        while nameBytes.count % 4 != 0 { nameBytes.append(0) }
        event.len = UInt32(nameBytes.count)
        let header: [UInt8] = withUnsafeBytes(of: &event) { [UInt8]($0) }
        return header + nameBytes
    }

    private let names: Set<String> = ["config.json", "..data"]

    @Test("events of other files in the directory are ignored, so a busy neighbour never re-reads the config")
    func neighboursIgnored() {
        let batch = record("proxy.log") + record("analytics.db-wal") + record(".config.json.swp")
        #expect(!ConfigWatcher.concerns(batch[...], names: names))
    }

    @Test("an event naming the file, or the ConfigMap's data symlink, concerns it wherever it is in the batch")
    func ownEventsCount() {
        #expect(ConfigWatcher.concerns((record("proxy.log") + record("config.json"))[...], names: names))
        #expect(ConfigWatcher.concerns(record("..data", mask: Int32(IN_MOVED_TO))[...], names: names))
    }

    @Test("a queue overflow or a nameless event counts: events may have been lost")
    func overflowCounts() {
        #expect(ConfigWatcher.concerns(record(nil, mask: Int32(IN_Q_OVERFLOW))[...], names: names))
        #expect(ConfigWatcher.concerns(record(nil)[...], names: names))
    }

    @Test("a truncated batch is read no further than it goes")
    func truncated() {
        let batch = record("config.json")
        #expect(!ConfigWatcher.concerns(batch[0..<10], names: names))
    }
}
