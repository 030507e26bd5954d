import Config
import Credentials
import Glibc

/// `check-config`: the config validated and reported without serving.
extension ProxyService {
    /// Validates a config and prints the report on stdout (so `> report.txt` keeps it): every
    /// problem with its JSON path, or "ok" and any warnings. Returns 1 on a problem, else 0.
    /// With `schemaOnly`, secret files and environment variables are not read. With a profile
    /// the merged config is checked; without one, the base and then every profile, each named.
    public static func checkConfig(config location: ConfigLocation, schemaOnly: Bool) -> Int32 {
        var text = location.source != "--config" ? "using \(location.description)\n" : ""
        var profiles: [String?] = [location.profile]
        if location.profile == nil { profiles += ConfigLoader.profileNames(path: location.path).map { $0 } }
        var failed = false
        for profile in profiles {
            var checked = location
            checked.profile = profile
            let label = location.path + (profile.map { " [profile \($0)]" } ?? "")
            let prefix = profile.map { "profile \($0): " } ?? ""
            switch checked.load(schemaOnly: schemaOnly) {
            case .success(let configuration):
                let routes = configuration.routes.count
                text +=
                    "\(label): ok (\(routes) route\(routes == 1 ? "" : "s")\(schemaOnly ? ", secrets not read" : ""))\n"
                for warning in ConfigWarnings.of(configuration) { text += "  warning: \(prefix)\(warning)\n" }
                // Not errors: the directory may be created before `serve` runs (a volume, tmpfiles.d).
                for warning in listenWarnings(configuration) { text += "  warning: \(prefix)\(warning)\n" }
                // Judged for the user running the check, who may not be the one `serve` runs as.
                if let problem = StateTrust.check(directory: configuration.stateDirectory) {
                    text +=
                        "  warning: \(prefix)stateDirectory: \(problem); serve run as uid \(geteuid()) will refuse to start\n"
                }
            case .failure(let errors):
                failed = true
                text += "\(label): \(errors.errors.count) problem\(errors.errors.count == 1 ? "" : "s")\n"
                for error in errors.errors { text += "  \(prefix)\(error)\n" }
            }
        }
        print(text, terminator: "")
        return failed ? 1 : 0
    }

    /// What would stop a `unix:` listener from binding: a missing directory, or something
    /// other than a socket at its path.
    static func listenWarnings(_ configuration: ProxyConfiguration) -> [String] {
        var warnings: [String] = []
        for (index, address) in configuration.listen.enumerated() {
            guard case .unix(let path) = address else { continue }
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
                separator: "/")
            var info = stat()
            if stat(directory.isEmpty ? "/" : directory, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR {
                warnings.append(
                    "listen[\(index)]: the directory \(directory) of \(address) does not exist; serve cannot bind there"
                )
            } else if lstat(path, &info) == 0 && info.st_mode & S_IFMT != S_IFSOCK {
                warnings.append("listen[\(index)]: \(path) exists and is not a socket; serve will refuse to replace it")
            }
        }
        return warnings
    }
}
