import Config
import EventLoop
import Glibc
import Synchronization
import Upstream

/// The analytics sidecar: takes values from apps (any loop), makes them durable through the
/// group-committing writer thread before the 202, and uploads them in batches from the home
/// loop. Delivery is at least once: a batch is deleted only after the endpoint accepted it.
public final class AnalyticsService: @unchecked Sendable {
    /// The configuration.
    public let configuration: AnalyticsConfiguration
    /// Key rules with the configured root.
    public let keys: AnalyticsKeys
    /// The numbers for the metrics endpoint.
    public let counters = AnalyticsCounters()
    /// The latest values stored, for the console.
    public let recent = RecentValues()
    let writer: AnalyticsWriter
    private let intake: Mutex<Intake>
    let uploader: AnalyticsUploader
    /// Bytes stored since the byte cap was last applied.
    private let bytesSinceCap = Atomic<Int>(0)

    struct Intake {
        var dedup: DedupBuffer
        var operations = TimedOperations()
    }

    /// The damaged store set aside at start, if one was.
    public let setAside: StoreSetAside?
    /// The store's directory, whose free space ends a full-disk condition.
    private let stateDirectory: String

    /// Opens (or creates) `<stateDirectory>/analytics.sqlite`. A file that is no usable store
    /// (damaged, not a database, not a regular file, another schema) is set aside, logged with
    /// what it held, and a new store is started: analytics keeps working, and the old file is
    /// kept for inspection. Any other failure (permissions, a lock, a full disk) throws.
    public init(configuration: AnalyticsConfiguration, stateDirectory: String) throws(AnalyticsStoreError) {
        self.configuration = configuration
        self.stateDirectory = stateDirectory
        keys = AnalyticsKeys(root: configuration.root, maxKeyBytes: configuration.maxKeyBytes)
        let path = stateDirectory + "/analytics.sqlite"
        for sidecar in AnalyticsStore.setAsideNonRegularSidecars(of: path) {
            Log.emit(
                .warning, "analytics_store_sidecar_set_aside",
                [
                    "path": .string(sidecar.path), "movedTo": .string(sidecar.movedTo),
                    "reason": .string("not a regular file but \(sidecar.kind)"),
                    "message": .string("SQLite keeps only regular files there; the store itself is kept"),
                ])
        }
        let store: AnalyticsStore
        do {
            store = try AnalyticsStore(path: path)
            setAside = nil
        } catch  where error.isDamagedStore {
            let aside = AnalyticsStore.setAside(path: path, error: error)
            if let cause = aside.renameErrno {
                // Nothing was moved (a read-only folder), so no new store can start beside it.
                throw .system("rename(\(path)) to set the damaged store aside (\(error.description))", errnoCode: cause)
            }
            var fields: [(String, LogValue)] = [
                ("movedTo", .string(aside.movedTo)), ("error", .string(error.description)),
                (
                    "message",
                    .string(
                        "the analytics store is damaged; the values it held that were not uploaded are lost "
                            + "(unsentValues, when the file still allows counting them; the file is kept for "
                            + "inspection) and a new store is started")
                ),
            ]
            if let count = aside.unsentValues { fields.append(("unsentValues", .int(count))) }
            Log.emit(.warning, "analytics_store_set_aside", fields: fields)
            store = try AnalyticsStore(path: path)
            setAside = aside
            counters.storeSetAside.store(1, ordering: .relaxed)
        }
        writer = AnalyticsWriter(store: store)
        intake = Mutex(Intake(dedup: DedupBuffer(intervalSeconds: configuration.bufferIntervalSeconds)))
        uploader = AnalyticsUploader(configuration: configuration)
    }

    // MARK: intake (any loop)

    /// Stores `values` for `subject`; `done` runs on `caller` once they are committed, with the
    /// number stored (repeats within the buffer interval are dropped first).
    public func record(
        _ values: [AnalyticsValue], subject: String, replyOn caller: EventLoop,
        _ done: @escaping (Result<Int, AnalyticsStoreError>) -> Void
    ) {
        let admitted = intake.withLock { intake in
            values.filter { intake.dedup.admit(key: $0.key, timestamp: $0.timestamp) }
        }
        counters.droppedDuplicate.add(values.count - admitted.count, ordering: .relaxed)
        guard !admitted.isEmpty else { return done(.success(0)) }
        let done = LoopBound(done, on: caller)
        let counters = self.counters
        let writer = self.writer
        let bytes = admitted.reduce(0) { $0 + subject.utf8.count + $1.key.utf8.count + $1.value.utf8.count }
        capStoredBytes(adding: bytes)
        writer.append(
            admitted.map { NewEvent(subject: subject, key: $0.key, value: $0.value, timestamp: $0.timestamp) }
        ) { result in
            counters.commits.store(writer.commits, ordering: .relaxed)
            switch result {
            case .success:
                counters.queued.add(admitted.count, ordering: .relaxed)
                counters.depth.add(admitted.count, ordering: .relaxed)
                counters.storeFull.store(false, ordering: .relaxed)
            case .failure(let error) where error.isStorageFull:
                counters.storeFull.store(true, ordering: .relaxed)
                counters.refusedFull.add(admitted.count, ordering: .relaxed)
            case .failure:
                break
            }
            caller.execute { done.value(result.map { admitted.count }) }
        }
    }

    /// Applies `maxStoredBytes` after every eighth of it stored, not only at upload time, so
    /// a burst between uploads overshoots the budget by at most that much.
    private func capStoredBytes(adding bytes: Int) {
        let max = configuration.maxStoredBytes
        let total = bytesSinceCap.add(bytes, ordering: .relaxed).newValue
        guard total >= max / 8, bytesSinceCap.compareExchange(expected: total, desired: 0, ordering: .relaxed).exchanged
        else { return }
        Self.trimStoredBytes(writer: writer, to: max, counters: counters)
    }

    /// Rows the ingest-time trim deletes per writer job. An eighth of the default budget is tens
    /// of thousands of rows, and one DELETE of them would hold the writer, and with it every
    /// request waiting on a commit, for as long as it takes; in batches, the appends queued
    /// meanwhile commit between them (bench/analytics.sh prints the acknowledgements' p99).
    static let trimBatchRows = 4_096

    /// Deletes the oldest values over `max` bytes a batch per writer job, each batch queued
    /// behind the appends already waiting.
    private static func trimStoredBytes(writer: AnalyticsWriter, to max: Int, counters: AnalyticsCounters) {
        _ = writer.perform { store in
            guard let dropped = try? store.enforceByteCap(max, maxRows: trimBatchRows), dropped > 0 else { return }
            counters.droppedBytes.add(dropped, ordering: .relaxed)
            counters.depth.subtract(dropped, ordering: .relaxed)
            if dropped == trimBatchRows { trimStoredBytes(writer: writer, to: max, counters: counters) }
        }
    }

    /// Starts (or restarts) a timed operation; returns its key.
    public func begin(_ request: OperationRequest, now: Int64) -> Result<String, AnalyticsKeyError> {
        keys.operationKey(path: request.path, operation: request.operation).map { key in
            intake.withLock { $0.operations.begin(key: key, cancelOn: request.cancelOn, now: now) }
            return key
        }
    }

    /// Ends the nearest running operation from `request.path` upward: its key and duration, nil if none runs.
    public func finish(_ request: OperationRequest, now: Int64) -> Result<
        (key: String, milliseconds: Int64)?, AnalyticsKeyError
    > {
        keys.operationSearch(path: request.path, operation: request.operation).map { candidates in
            intake.withLock { $0.operations.finish(searchingFrom: candidates, now: now) }
        }
    }

    /// Drops the nearest running operation; its key, nil if none runs.
    public func cancel(_ request: OperationRequest) -> Result<String?, AnalyticsKeyError> {
        keys.operationSearch(path: request.path, operation: request.operation).map { candidates in
            intake.withLock { $0.operations.cancel(searchingFrom: candidates) }
        }
    }

    /// Drops the operations registered to be cancelled by `phase`.
    public func phase(_ phase: AppPhase) -> [String] {
        intake.withLock { $0.operations.phase(phase) }
    }

    // MARK: condition

    /// Free bytes in the store's file system that end a full-disk condition before the next
    /// write proves it: room for the WAL to grow by a few commits.
    static let recoveredFreeBytes = 4 << 20

    /// Why the proxy is not ready on analytics' account: the store's disk filled up, so values
    /// are refused (507). The condition ends at the next commit that succeeds, or here, once the
    /// file system has `recoveredFreeBytes` free again (so a probe that keeps traffic away does
    /// not keep it forever).
    public func unreadyReason() -> String? {
        guard counters.storeFull.load(ordering: .relaxed) else { return nil }
        var info = statvfs()
        if statvfs(stateDirectory, &info) == 0, Int(info.f_bavail) * Int(info.f_frsize) >= Self.recoveredFreeBytes {
            counters.storeFull.store(false, ordering: .relaxed)
            return nil
        }
        return "the disk holding the analytics store is full: new values are refused (507) until space is freed"
    }

    /// What readiness reports without failing: a damaged store set aside at start.
    public var notices: [String] {
        setAside == nil
            ? []
            : [
                "the analytics store was damaged and set aside at start (its unsent values are lost; "
                    + "the log names the file); a new store is in use"
            ]
    }

    // MARK: lifecycle

    /// Starts the uploader on `home` with that loop's libcurl client; `refresher` (the OAuth
    /// token manager, when there is one) is asked for new tokens when the endpoint answers 401.
    public func start(home: EventLoop, http: UpstreamClient, refresher: (any UploadTokenRefresher)?) {
        uploader.start(service: self, home: home, http: http, refresher: refresher)
    }

    /// Asks for an upload now; `done` runs on `caller` with what this cycle did.
    public func flush(replyOn caller: EventLoop, _ done: @escaping (FlushReport) -> Void) {
        uploader.flush(replyOn: caller, done)
    }

    /// The tokens the uploader uses (call on the home loop).
    public func credentialsChanged(_ token: UploadToken) { uploader.credentials = token }

    /// At shutdown: one last upload, bounded by `seconds`; what is not sent stays on disk.
    public func finalUpload(within seconds: Double, home: EventLoop) -> Bool {
        uploader.finalUpload(within: seconds, home: home)
    }

    /// Commits what is queued and closes the store.
    public func shutdown() { writer.shutdown() }
}

/// What one upload cycle did.
public struct FlushReport: Sendable, Equatable {
    /// Values the endpoint accepted.
    public var sent = 0
    /// Values it refused for good.
    public var dropped = 0
    /// Values still stored.
    public var remaining = 0
    /// Why the cycle stopped early (endpoint unavailable, no credential), if it did.
    public var deferredReason: String?
}
