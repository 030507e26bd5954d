import Config
import EventLoop
import Glibc
import JSON
import Synchronization
import Upstream

/// The upload loop, confined to the home loop: every `pushIntervalSeconds` (or on flush) it
/// prunes and caps the store, then sends the oldest batch — values of one subject recorded in
/// the same second, so one `timestamp` is true for all — until the store is empty or the
/// endpoint asks to wait. Store work runs on the writer thread, in order with intake.
final class AnalyticsUploader: @unchecked Sendable {
    private let configuration: AnalyticsConfiguration
    private var schedule: UploadSchedule
    private weak var service: AnalyticsService?
    private var home: EventLoop?
    private var http: UpstreamClient?
    /// Refreshes tokens after a 401 (OAuth grants); nil for static tokens.
    private var refresher: (any UploadTokenRefresher)?
    /// The token generation a refresh was already asked for, so one refused token costs one refresh.
    private var refreshedGeneration: UInt64?
    private var pushTimer: TimerID?
    private var report = FlushReport()
    private var waiters: [(EventLoop, LoopBound<(FlushReport) -> Void>)] = []
    /// The tokens to send with (home loop copy).
    var credentials: UploadToken = .none
    static let timeout = 30.0

    init(configuration: AnalyticsConfiguration) {
        self.configuration = configuration
        schedule = UploadSchedule(interval: configuration.pushIntervalSeconds)
    }

    func start(service: AnalyticsService, home: EventLoop, http: UpstreamClient, refresher: (any UploadTokenRefresher)?)
    {
        self.service = service
        self.home = home
        self.http = http
        self.refresher = refresher
        // Prune and count at start, then upload on the interval.
        home.execute { [self] in cycle(force: false) }
    }

    func flush(replyOn caller: EventLoop, _ done: @escaping (FlushReport) -> Void) {
        guard let home else { return done(FlushReport(deferredReason: "analytics is not running")) }
        let done = LoopBound(done, on: caller)
        home.execute { [self] in
            waiters.append((caller, done))
            cycle(force: true)
        }
    }

    func finalUpload(within seconds: Double, home: EventLoop) -> Bool {
        let box = FinishedBox()
        flush(replyOn: home) { _ in box.done.store(true, ordering: .releasing) }
        let deadline = UnixTime.now() + seconds
        while !box.done.load(ordering: .acquiring) && UnixTime.now() < deadline { usleep(10_000) }
        return box.done.load(ordering: .acquiring)
    }

    private final class FinishedBox: Sendable { let done = Atomic<Bool>(false) }

    // MARK: the cycle (home loop)

    private func cycle(force: Bool) {
        guard schedule.begin(now: UnixTime.now(), force: force) else { return }
        if let pushTimer, let home { home.cancel(pushTimer) }
        pushTimer = nil
        nextBatch()
    }

    private func nextBatch() {
        guard let service, let home else { return }
        let now = Int64(UnixTime.now())
        let expireBefore = now - Int64(configuration.expireIntervalSeconds)
        let maxStored = configuration.maxStoredEvents
        let maxBytes = configuration.maxStoredBytes
        // With uploads off (the test profile) the cycle still prunes and enforces the caps; it
        // reads no batch and sends nothing.
        let limit = configuration.uploads ? configuration.maxBatch : 0
        let uploadBytes = configuration.maxUploadBytes
        let product = configuration.product
        let counters = service.counters
        // The store work and the body's JSON both happen on the writer thread: no event loop
        // waits for a query or serialises a batch.
        service.writer.perform { [self] store in
            let result: Result<Batch, AnalyticsStoreError>
            do throws(AnalyticsStoreError) {
                counters.droppedExpired.add(try store.prune(olderThan: expireBefore), ordering: .relaxed)
                counters.droppedCap.add(try store.enforceCap(maxStored), ordering: .relaxed)
                counters.droppedBytes.add(try store.enforceByteCap(maxBytes), ordering: .relaxed)
                try store.reclaimSpace()
                counters.depth.store(try store.count(), ordering: .relaxed)
                var events = try store.oldestBatch(limit: limit, maxBytes: uploadBytes)
                var body = Self.body(events, product: product)
                // Escaped characters can outgrow the estimate: shed values until the body fits.
                while body.count > uploadBytes && events.count > 1 {
                    events.removeLast(max(1, events.count / 8))
                    body = Self.body(events, product: product)
                }
                result = .success(Batch(events: events, body: body))
            } catch {
                result = .failure(error)
            }
            home.execute { [self] in
                switch result {
                case .success where !configuration.uploads:
                    report.deferredReason = "uploads are off (analytics.uploads is false)"
                    finished(.empty, reason: nil)
                case .success(let batch) where batch.events.isEmpty: finished(.empty, reason: nil)
                case .success(let batch): send(batch)
                case .failure(let error): finished(.retryLater, reason: "store: \(error)")
                }
            }
        }
    }

    /// Stored values and the upload body made of them.
    struct Batch: Sendable {
        var events: [StoredEvent]
        var body: [UInt8]
    }

    /// Uploads `batch`; `mayRefresh` is false for the one resend after a refresh, so an endpoint
    /// that refuses every token costs one refresh per cycle at most.
    private func send(_ prepared: Batch, mayRefresh: Bool = true) {
        let batch = prepared.events
        guard let http, !batch.isEmpty else { return }
        guard
            let credential = credentials.value(for: configuration.credential)
                ?? (configuration.credential == .none ? "" : nil)
        else {
            return finished(.retryLater, reason: "no \(configuration.credential.rawValue) credential to upload with")
        }
        var headers = ["Content-Type: application/json", "Accept: application/json"]
        if !credential.isEmpty { headers += ["Authorization: \(credential)", "X-Authorization: \(credential)"] }
        let body = prepared.body
        let request = UpstreamRequest(
            method: "POST", url: configuration.endpoint.description, headers: headers,
            hasBody: true, bodyLength: body.count, timeout: Self.timeout)
        http.fetch(request, body: body) { [self] result in
            switch result {
            case .success(let response) where (200...299).contains(response.status):
                remove(batch, outcome: .sent)
            case .success(let response) where response.status == 401 && mayRefresh:
                refreshAndResend(prepared)
            case .success(let response) where [401, 408, 429].contains(response.status) || response.status >= 500:
                finished(.retryLater, reason: "the endpoint answered HTTP \(response.status)")
            case .success(let response) where (300...399).contains(response.status):
                // Not followed (the batch and its credentials go to the configured endpoint
                // only), and not dropped either: a moved endpoint keeps every batch until the
                // config names the new place (found by a review: 3xx fell through to "drop").
                // Without its query and fragment: a redirect to a signed URL carries its
                // signature there, and the reason reaches the log and the console.
                let location = response.first("Location").map(Self.withoutQuery)
                Log.emit(
                    .warning, "analytics_endpoint_redirected",
                    ["status": .int(response.status), "location": .string(location ?? "")])
                finished(
                    .retryLater,
                    reason: "the endpoint answered HTTP \(response.status)\(location.map { " to \($0)" } ?? "")"
                        + "; set analytics.endpoint to where it points")
            case .success(let response):
                Log.emit(
                    .warning, "analytics_batch_dropped", ["status": .int(response.status), "values": .int(batch.count)])
                noteProblem(
                    "the endpoint refused a batch of \(batch.count) values with HTTP \(response.status); they were dropped"
                )
                remove(batch, outcome: .dropped)
            case .failure(let error):
                finished(.retryLater, reason: error.detail)
            }
        }
    }

    /// The endpoint refused the token: ask for a refresh once per token generation (as a proxied
    /// 401 does) and resend with the new token; otherwise keep the batch for the next cycle.
    private func refreshAndResend(_ batch: Batch) {
        let seen = credentials.generation
        guard let refresher, let home, refreshedGeneration != seen else {
            return finished(.retryLater, reason: "the endpoint answered HTTP 401")
        }
        refreshedGeneration = seen
        refresher.refreshAfterRejection(seen: seen, replyOn: home) { [self] ready in
            // The new snapshot reaches this loop before the answer (both are messages to it).
            if ready, credentials.generation != seen { return send(batch, mayRefresh: false) }
            finished(.retryLater, reason: "the endpoint answered HTTP 401; no newer token")
        }
    }

    /// Deletes a finished batch, then goes on.
    private func remove(_ batch: [StoredEvent], outcome: UploadSchedule.BatchOutcome) {
        guard let service, let home else { return }
        let ids = batch.map(\.id)
        let counters = service.counters
        service.writer.perform { [self] store in
            let deleted = (try? store.delete(ids: ids)) != nil
            home.execute { [self] in
                if deleted {
                    counters.depth.subtract(ids.count, ordering: .relaxed)
                    if outcome == .sent {
                        counters.sent.add(ids.count, ordering: .relaxed)
                        counters.lastUpload.store(Int(UnixTime.now()), ordering: .relaxed)
                        counters.lastProblem.withLock { $0 = nil }
                        report.sent += ids.count
                    } else {
                        counters.droppedRejected.add(ids.count, ordering: .relaxed)
                        report.dropped += ids.count
                    }
                }
                finished(
                    deleted ? outcome : .retryLater, reason: deleted ? nil : "the store could not delete a sent batch")
            }
        }
    }

    private func finished(_ outcome: UploadSchedule.BatchOutcome, reason: String?) {
        guard let home, let service else { return }
        switch schedule.finished(outcome, now: UnixTime.now(), jitter: Double.random(in: 0..<1)) {
        case .continueUploading:
            nextBatch()
        case .wait(let until):
            if let reason {
                noteProblem(reason)
                report.deferredReason = reason
                Log.emit(
                    .warning, "analytics_upload_deferred",
                    ["reason": .string(reason), "retryInSeconds": .double(until - UnixTime.now())])
            }
            report.remaining = service.counters.depth.load(ordering: .relaxed)
            let finishedReport = report
            report = FlushReport()
            for (caller, done) in waiters { caller.execute { done.value(finishedReport) } }
            waiters.removeAll()
            // A fresh clock (not the iteration's cached time), and the timer is the authority when it
            // fires: a timer a hair early must not be refused by the backoff it was armed for.
            pushTimer = home.schedule(at: NanoTime.now().adding(seconds: max(0.01, until - UnixTime.now()) + 0.001)) {
                [weak self] in
                self?.pushTimer = nil
                self?.cycle(force: true)
            }
        }
    }

    /// `url` up to its query (`?`) or fragment (`#`).
    static func withoutQuery(_ url: String) -> String {
        String(url[..<(url.firstIndex { $0 == "?" || $0 == "#" } ?? url.endIndex)])
    }

    /// Keeps `reason` as the latest upload problem (the console shows it until an upload succeeds).
    private func noteProblem(_ reason: String) {
        service?.counters.lastProblem.withLock { $0 = UploadProblem(time: Int(UnixTime.now()), reason: reason) }
    }

    /// `{"product":…,"pennkey":…,"timestamp":…,"data":[{"key":…,"value":…},…]}`.
    /// Empty for an empty batch; subject and timestamp are the first value's (a batch shares them).
    static func body(_ batch: [StoredEvent], product: Int) -> [UInt8] {
        guard let first = batch.first else { return [] }
        let subject = first.subject
        let timestamp = first.timestamp
        var data: [JSONValue] = []
        data.reserveCapacity(batch.count)
        for event in batch {
            var pair = JSONObject()
            pair["key"] = .string(event.key)
            pair["value"] = .string(event.value)
            data.append(.object(pair))
        }
        var object = JSONObject()
        object["product"] = .number(JSONNumber(product))
        object["pennkey"] = .string(subject)
        object["timestamp"] = .number(JSONNumber(timestamp))
        object["data"] = .array(data)
        return JSONValue.object(object).serializedBytes()
    }
}
