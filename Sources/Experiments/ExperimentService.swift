import Credentials
import EventLoop
import Glibc
import JSON
import Synchronization

/// The machine's experiment state: the installation id, QA overrides and today's exposures,
/// kept in `<stateDirectory>/experiments.json` (mode 0600, replaced atomically on a worker
/// thread). The installation id file is made only once experiments are configured (`prepare`). Proxied requests read only `overridesGeneration` (one atomic load) and fetch the
/// overrides again when it moved; everything else here serves `/_platform/experiments`.
public final class ExperimentService: Sendable {
    /// The state file's name.
    public static let fileName = "experiments.json"

    private let stateDirectory: String
    private let identity = Mutex<(id: String?, saved: Bool)>((nil, false))
    /// Assignments and exposures for the metrics.
    public let counters = ExperimentCounters()
    private let state: Mutex<State>
    private let generation = Atomic<UInt64>(1)
    private let file: DurableFile
    private let worker = BlockingWorker(name: "experiments")

    private struct State {
        var overrides: ExperimentOverrides
        var exposures: ExposureLog
    }

    /// Loads the state file, if any. Blocks on disk I/O: call at startup. An unreadable state
    /// file is moved aside and starts empty.
    public init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
        file = DurableFile(directory: stateDirectory, name: Self.fileName)
        var loaded = State(overrides: ExperimentOverrides(), exposures: ExposureLog())
        switch file.read() {
        case .missing: break
        case .bytes(let bytes):
            if let root = try? JSONValue.parse(bytes), root.objectValue != nil {
                loaded = State(
                    overrides: ExperimentOverrides(json: root["overrides"]),
                    exposures: ExposureLog(json: root["exposures"]))
            } else {
                let moved = file.moveAside()
                Log.emit(
                    .warning, "experiments_state_unreadable",
                    ["movedTo": .string(moved), "reason": .string("not a JSON object")])
            }
        case .unreadable(let reason):
            let moved = file.moveAside()
            Log.emit(.warning, "experiments_state_unreadable", ["movedTo": .string(moved), "reason": .string(reason)])
        }
        state = Mutex(loaded)
    }

    /// Loads or creates the installation id. Blocks on disk I/O: call at startup or reload,
    /// off the loops, whenever experiments are configured. When the file cannot be written the
    /// id lives in memory only (returned error, for the log): assignments stay sticky until exit.
    public func prepare() -> TokenStoreError? {
        guard !identity.withLock({ $0.saved }) else { return nil }
        do {
            let id = try InstallationID.loadOrCreate(stateDirectory: stateDirectory)
            identity.withLock { $0 = (id, true) }
            return nil
        } catch {
            identity.withLock { if $0.id == nil { $0.id = randomToken(bytes: 16) } }
            return error
        }
    }

    /// The logged-out subject; until `prepare` has saved one, an id in memory only.
    public var installationID: String {
        identity.withLock { identity in
            if identity.id == nil { identity.id = randomToken(bytes: 16) }
            return identity.id!
        }
    }

    /// Whom `credentials` assign for: the login's subject (`pennkey`, else `sub`), else the installation id.
    public func subject(_ credentials: CredentialSnapshot) -> (id: String, loggedIn: Bool) {
        if credentials.status.loggedIn, let subject = credentials.subject, !subject.isEmpty { return (subject, true) }
        return (installationID, false)
    }

    /// Changes whenever the overrides do; loops compare it to decide whether their cached
    /// header lines are stale.
    public var overridesGeneration: UInt64 { generation.load(ordering: .acquiring) }

    /// The overrides in force with their generation.
    public func overrides() -> (generation: UInt64, overrides: ExperimentOverrides) {
        state.withLock { (generation.load(ordering: .acquiring), $0.overrides) }
    }

    /// Called on the worker thread once a change is on disk (nil) or could not be written.
    public typealias Saved = @Sendable (TokenStoreError?) -> Void

    /// Forces `variant` of `experiment` for everyone on this machine, in force at once;
    /// `saved` runs once the state file holding it is durably written (or failed to be), so
    /// an acknowledgement sent from there survives a crash.
    public func setOverride(_ variant: String, for experiment: String, saved: Saved? = nil) {
        change(saved: saved) { $0.overrides.set(variant, for: experiment) }
    }

    /// Clears `experiment`'s override; `saved` as for `setOverride`.
    public func clearOverride(_ experiment: String, saved: Saved? = nil) {
        change(saved: saved) { $0.overrides.clear(experiment) }
    }

    /// The `assignments` not yet recorded as exposures of `subject` on `day`; they count as
    /// recorded from now on (``releaseExposures`` undoes it when the recording fails).
    public func claimExposures(_ assignments: [Assignment], subject: String, day: Int) -> [Assignment] {
        state.withLock { state in
            assignments.filter {
                state.exposures.claim(subject: subject, experiment: $0.experiment, variant: $0.variant, day: day)
            }
        }
    }

    /// Forgets claims whose values could not be committed.
    public func releaseExposures(_ assignments: [Assignment], subject: String, day: Int) {
        state.withLock { state in
            for a in assignments {
                state.exposures.release(subject: subject, experiment: a.experiment, variant: a.variant, day: day)
            }
        }
    }

    /// Writes the state after exposures were committed.
    public func exposuresCommitted(_ assignments: [Assignment]) {
        counters.exposed(assignments)
        change { _ in }
    }

    /// Waits for pending writes and stops the worker.
    public func shutdown() { worker.shutdown() }

    /// Applies `update`, bumps the generation and queues a write of the result, all under the
    /// lock so writes reach the disk in the order the changes were made; `saved` runs after the
    /// write (at once, with ECANCELED, once the worker has shut down).
    private func change(saved: Saved? = nil, _ update: (inout State) -> Void) {
        state.withLock { state in
            update(&state)
            generation.add(1, ordering: .releasing)
            var root = JSONObject()
            root["overrides"] = state.overrides.json
            root["exposures"] = state.exposures.json
            let bytes = JSONValue.object(root).serializedBytes()
            let file = self.file
            let queued = worker.submit {
                do throws(TokenStoreError) {
                    try file.write(bytes)
                    saved?(nil)
                } catch {
                    Log.emit(.error, "experiments_state_write_failed", ["error": .string(error.description)])
                    saved?(error)
                }
            }
            if !queued { saved?(TokenStoreError(call: "write", path: file.path, errnoCode: ECANCELED)) }
        }
    }
}
