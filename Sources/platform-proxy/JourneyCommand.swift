import Config
import EventLoop
import Glibc
import JSON
import Upstream

/// `login --journey [NAME]` / `login --resume URL`: walks an AM journey in the terminal through
/// the running proxy's `/_platform/login/journey` endpoints (the proxy keeps session and tokens).
public enum JourneyCommand {
    /// Most steps walked before giving up (a tree that loops, or answers a file keeps failing).
    static let maxTurns = 50

    /// Runs the journey; exit 0 signed in, 1 refused or failed, 2 proxy unreachable or bad usage.
    /// `provider` names one of several journey providers (`?provider=` on every call).
    public static func login(
        config location: ConfigLocation, journey: String?, answersFile: String?, resume: String?,
        provider: String? = nil
    ) -> Int32 {
        guard let (target, config) = LoginCommands.target(location) else { return 2 }
        var file: JSONObject?
        if let answersFile {
            guard let bytes = readFile(answersFile), let object = (try? JSONValue.parse(bytes))?.objectValue else {
                Log.writeStandardError("platform-proxy: \(answersFile) is not a readable JSON object of answers\n")
                return 2
            }
            file = object
        }
        let prompter = JourneyPrompter(file: file, filePath: answersFile)
        var start = JSONObject()
        if let journey { start["journey"] = .string(journey) }
        if let resume { start["resume"] = .string(resume) }
        let query = provider.map { "?provider=" + LoginCommands.FormEncodingText.escape($0) } ?? ""
        var reply = post(target, "/_platform/login/journey" + query, .object(start))
        for _ in 0..<maxTurns {
            let node: JSONValue
            switch reply {
            case .failure(let exit): return exit.code
            case .success(let answered): node = answered
            }
            switch node["node"]?.stringValue {
            case "success":
                if node["tokens"]?.boolValue == false {
                    LoginCommands.say(
                        "The journey succeeded, but AM issued no session (noSession): nothing was stored.")
                    return 0
                }
                LoginCommands.say("Signed in\(node["user"]?.stringValue.map { " as \($0)" } ?? "").")
                if case .success(let response) = BlockingHTTP.request("GET", "/_platform/auth", to: target, timeout: 5),
                    let auth = try? JSONValue.parse(response.body)
                {
                    LoginCommands.describe(auth, grant: config.provider?.grant)
                }
                return 0
            case "failure":
                LoginCommands.say("The journey failed: \(node["cause"]?.stringValue ?? "unknown cause").")
                return 1
            case "error":
                LoginCommands.say("✗ \(node["message"]?.stringValue ?? "The server refused.")")
                // From a file the same answers would be refused again.
                guard file == nil, node["step"]?.stringValue != nil else { return 1 }
            case "continue":
                if node["suspended"]?.boolValue == true {
                    _ = try? prompter.answers(for: node)
                    LoginCommands.say(
                        "The journey is suspended. Open the link you were sent, or run:\n  platform-proxy login --resume URL"
                    )
                    return 1
                }
                if file != nil, hasPolicyFailures(node) {
                    LoginCommands.say("The server refused the answers from \(answersFile ?? "the file"):")
                    for callback in node["callbacks"]?.arrayValue ?? [] {
                        for policy in callback["inputs"]?.arrayValue?.first?["failedPolicies"]?.arrayValue ?? [] {
                            LoginCommands.say(
                                "  \(callback["prompt"]?.stringValue ?? "?"): \(JourneyPrompter.describePolicy(policy))"
                            )
                        }
                    }
                    return 1
                }
            default:
                LoginCommands.say("unexpected answer from the proxy: \(node.serialized())")
                return 1
            }
            guard let step = node["step"]?.stringValue else { return 1 }
            let answers: JSONObject
            do {
                answers = try prompter.answers(for: node)
            } catch {
                LoginCommands.say(error.message)
                return 1
            }
            reply = post(
                target, "/_platform/login/journey/\(step)" + query,
                .object(JSONObject(uniqueKeysWithValues: [("answers", .object(answers))])))
        }
        LoginCommands.say("The journey did not end after \(maxTurns) steps.")
        return 1
    }

    /// POSTs `body`; a node on success, else the exit code after saying why.
    private static func post(_ target: BlockingHTTP.Target, _ path: String, _ body: JSONValue) -> Result<
        JSONValue, ExitCode
    > {
        switch BlockingHTTP.request("POST", path, to: target, timeout: 120, json: body.serialized()) {
        case .failure(let error):
            LoginCommands.say("platform-proxy is not reachable: \(error)")
            return .failure(ExitCode(2))
        case .success(let response):
            guard let json = try? JSONValue.parse(response.body), json.objectValue != nil else {
                LoginCommands.say("unexpected answer (HTTP \(response.status)) from the proxy")
                return .failure(ExitCode(1))
            }
            if json["node"] == nil {
                LoginCommands.say(
                    "The proxy refused (HTTP \(response.status)): \(json["message"]?.stringValue ?? json.serialized())")
                return .failure(ExitCode(1))
            }
            return .success(json)
        }
    }

    private static func hasPolicyFailures(_ node: JSONValue) -> Bool {
        (node["callbacks"]?.arrayValue ?? []).contains { callback in
            (callback["inputs"]?.arrayValue ?? []).contains { !($0["failedPolicies"]?.arrayValue ?? []).isEmpty }
        }
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        guard let handle = fopen(path, "rb") else { return nil }
        defer { fclose(handle) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = fread(&chunk, 1, chunk.count, handle)
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }
}

/// A process exit status carried through a `Result`.
struct ExitCode: Error {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
