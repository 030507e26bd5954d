/// What credentialed requests do while nobody is logged in.
public struct GateConfiguration: Sendable, Equatable {
    /// How the gate answers.
    public enum Mode: String, Sendable, Equatable, CaseIterable {
        /// Answer 401 `awaiting_authorization` at once.
        case reject
        /// Hold the request up to `waitSeconds` for a login, then send it or answer 401.
        case wait
    }

    /// Reject at once or wait for a login. Default `.reject`.
    public var mode: Mode
    /// Seconds a request is held in `.wait` mode. Default 10.
    public var waitSeconds: Double

    /// A gate with the documented defaults unless given.
    public init(mode: Mode = .reject, waitSeconds: Double = 10) {
        self.mode = mode
        self.waitSeconds = waitSeconds
    }
}
