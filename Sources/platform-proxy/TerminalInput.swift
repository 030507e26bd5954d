import Glibc

/// Lines typed at the terminal (or piped in) for the CLI; secrets are read with echo off.
enum TerminalInput {
    /// Shows `prompt` and reads one line from stdin without its newline; nil at end of input.
    /// With `secret`, and stdin a terminal, echo goes off before the prompt is shown (so nothing
    /// typed after seeing it is echoed) and comes back even when reading fails.
    static func readLine(prompt text: String, secret: Bool) -> String? {
        var saved = termios()
        guard secret, isatty(0) == 1, tcgetattr(0, &saved) == 0 else {
            LoginCommands.writeOut(text)
            return Swift.readLine(strippingNewline: true)
        }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        // ECHONL keeps the newline visible so the next output starts on its own line.
        quiet.c_lflag |= tcflag_t(ECHONL)
        // TCSANOW: typed-ahead input is kept, not flushed.
        _ = tcsetattr(0, TCSANOW, &quiet)
        // Ctrl-C (or a kill) at the prompt must not leave the terminal without echo: the
        // handler puts the saved settings back, then lets the signal do what it would have.
        echoRestore.pointee = saved
        let previous = interrupting.map { ($0, signal($0, restoreEchoAndRaise)) }
        defer {
            _ = tcsetattr(0, TCSANOW, &saved)
            for (number, handler) in previous { signal(number, handler) }
        }
        LoginCommands.writeOut(text)
        return Swift.readLine(strippingNewline: true)
    }

    private static let interrupting = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
}

/// The terminal settings to restore from a signal handler (which can capture nothing). Kept in
/// memory of the C struct's own size: a Swift global of this imported C struct was emitted 57
/// bytes long (its symbol in the release binary too), short of the 60 bytes of `termios`, and
/// each copy into it wrote 3 bytes past it (AddressSanitizer's global-buffer-overflow).
nonisolated(unsafe) private let echoRestore: UnsafeMutablePointer<termios> = {
    let settings = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    settings.initialize(to: termios())
    return settings
}()

/// Restores echo (tcsetattr is async-signal-safe), then re-raises with the default action.
private func restoreEchoAndRaise(_ number: Int32) {
    _ = tcsetattr(0, TCSANOW, echoRestore)
    signal(number, SIG_DFL)
    raise(number)
}
