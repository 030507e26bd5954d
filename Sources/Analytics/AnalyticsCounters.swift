import Synchronization

/// The analytics numbers the metrics endpoint reports; written from any thread.
public final class AnalyticsCounters: Sendable {
    /// Values acknowledged (committed) with 202.
    public let queued = Atomic<Int>(0)
    /// Values the endpoint accepted.
    public let sent = Atomic<Int>(0)
    /// Values dropped because the endpoint refused their batch.
    public let droppedRejected = Atomic<Int>(0)
    /// Values pruned for age.
    public let droppedExpired = Atomic<Int>(0)
    /// Values dropped at `maxStoredEvents`.
    public let droppedCap = Atomic<Int>(0)
    /// Values dropped, oldest first, to keep the store within `maxStoredBytes`.
    public let droppedBytes = Atomic<Int>(0)
    /// Values dropped as repeats within the buffer interval.
    public let droppedDuplicate = Atomic<Int>(0)
    /// Values stored and not yet sent (as of the last store operation).
    public let depth = Atomic<Int>(0)
    /// Unix seconds of the last successful upload, 0 if none.
    public let lastUpload = Atomic<Int>(0)
    /// Why the latest upload did not go through (deferred or its batch dropped), until an upload
    /// succeeds: what the console shows beside the last upload.
    public let lastProblem = Mutex<UploadProblem?>(nil)
    /// Store transactions (each one fsync).
    public let commits = Atomic<Int>(0)
    /// 1 when a damaged store was set aside at start (and a new one started), else 0.
    public let storeSetAside = Atomic<Int>(0)
    /// True from a commit that failed for want of disk space until a commit succeeds or space returns.
    public let storeFull = Atomic<Bool>(false)
    /// Values refused (507) because the store's disk was full.
    public let refusedFull = Atomic<Int>(0)

    /// Zero counters.
    public init() {}
}

/// An upload that did not go through: when, and why in words (no token, no body).
public struct UploadProblem: Sendable, Equatable {
    /// Unix seconds.
    public let time: Int
    public let reason: String

    public init(time: Int, reason: String) {
        self.time = time
        self.reason = reason
    }
}
