/// What credentialed requests do while nobody is logged in.
package struct GateConfiguration: Sendable, Equatable {
    /// How the gate answers.
    package enum Mode: String, Sendable, Equatable, CaseIterable {
        /// Answer 401 `awaiting_authorization` at once.
        case reject
        /// Hold the request up to `waitSeconds` for a login, then send it or answer 401.
        case wait
    }

    /// Reject at once or wait for a login. Default `.reject`.
    package var mode: Mode
    /// Seconds a request is held in `.wait` mode. Default 10.
    package var waitSeconds: Double

    /// A gate with the documented defaults unless given.
    package init(mode: Mode = .reject, waitSeconds: Double = 10) {
        self.mode = mode
        self.waitSeconds = waitSeconds
    }
}
