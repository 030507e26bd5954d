/// When the uploader runs (docs/architecture.md, "State machines as values"):
/// `idle → uploading → idle | backoff`.
/// A value with a manual clock; `AnalyticsUploader` performs the I/O.
public struct UploadSchedule: Sendable, Equatable {
    /// How one batch ended.
    public enum BatchOutcome: Sendable, Equatable {
        /// The endpoint accepted it (2xx): deleted.
        case sent
        /// The endpoint refused it for good (4xx other than 401/408/429): deleted, counted.
        case dropped
        /// Nothing to send.
        case empty
        /// 5xx, 408/429, a 401 a refresh did not cure, no credential or no answer: kept, retried later.
        case retryLater
    }

    /// What to do next.
    public enum Next: Sendable, Equatable {
        /// Send the next batch now.
        case continueUploading
        /// Done; the next push is at this time.
        case wait(until: Double)
    }

    private enum State: Sendable, Equatable { case idle, uploading, backoff(until: Double) }
    private var state = State.idle
    private var failures = 0
    /// Seconds between pushes.
    public let interval: Double
    /// Longest backoff, seconds.
    public let maxBackoff: Double

    /// A schedule pushing every `interval` seconds.
    public init(interval: Double, maxBackoff: Double = 300) {
        self.interval = interval
        self.maxBackoff = maxBackoff
    }

    /// Whether an upload is running.
    public var isUploading: Bool { state == .uploading }

    /// The push timer fired or a flush was asked for: true when a cycle should start now.
    /// A flush (`force`) ignores a running backoff.
    public mutating func begin(now: Double, force: Bool) -> Bool {
        switch state {
        case .uploading: return false
        case .backoff(let until) where !force && now < until: return false
        default:
            state = .uploading
            return true
        }
    }

    /// One batch finished.
    public mutating func finished(_ outcome: BatchOutcome, now: Double, jitter: Double) -> Next {
        switch outcome {
        case .sent, .dropped:
            failures = 0
            return .continueUploading
        case .empty:
            failures = 0
            state = .idle
            return .wait(until: now + interval)
        case .retryLater:
            failures += 1
            // Exponential from the push interval, capped, with jitter in [0.5, 1.5).
            var delay = interval
            for _ in 1..<failures where delay < maxBackoff { delay *= 2 }
            let until = now + min(delay, maxBackoff) * (0.5 + jitter)
            state = .backoff(until: until)
            return .wait(until: until)
        }
    }
}
