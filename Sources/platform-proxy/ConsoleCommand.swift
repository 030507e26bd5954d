import Config
import Glibc

/// `platform-proxy console`: prints the console's URL (docs/console.md) and opens it with
/// `xdg-open` where a desktop session has one; without a browser the printed URL is the answer.
public enum ConsoleCommand {
    /// Exit 0 with the URL printed; 2 when the config cannot be read or names no TCP listener.
    public static func run(config location: ConfigLocation) -> Int32 {
        guard let (target, config) = LoginCommands.target(location) else { return 2 }
        guard target.unixSocket == nil else {
            LoginCommands.say(
                "The first listen address is a Unix socket, which a browser cannot open; add a TCP listen address.")
            return 2
        }
        let url = target.baseURL + "/_platform/console"
        LoginCommands.say(url)
        if config.apiKey != nil { LoginCommands.say("The page asks for the proxy key (apiKey) once per tab.") }
        if hasDisplay(), let opener = executable(named: "xdg-open") { open(url, with: opener) }
        return 0
    }

    private static func hasDisplay() -> Bool {
        ["DISPLAY", "WAYLAND_DISPLAY"].contains { (name: String) in getenv(name).map { $0.pointee != 0 } ?? false }
    }

    /// The first `name` on `PATH` that may be executed.
    static func executable(named name: String) -> String? {
        guard let path = getenv("PATH").map({ String(cString: $0) }) else { return nil }
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Starts `opener url` detached, its output discarded; a failure to start is not an error
    /// (the URL is printed already).
    private static func open(_ url: String, with opener: String) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(opener), strdup(url), nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        _ = posix_spawn(&pid, opener, &actions, nil, argv, environ)
    }
}
