import Config
import CurlTuning
import EventLoop
import Glibc
import Proxy

/// Command-line parsing, the login commands that talk to a running proxy, and wiring; the
/// serving lives in the Proxy module.
let arguments: Arguments
do {
    arguments = try Arguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    Log.writeStandardError(
        "platform-proxy: \(error.message)\nRun 'platform-proxy help' for the commands and options.\n")
    exit(2)
}
if arguments.version {
    print("platform-proxy \(ProxyService.version)")
    exit(0)
}
if arguments.help {
    print(arguments.helpTopic.map(Usage.command) ?? Usage.overview, terminator: "")
    exit(0)
}
if let name = arguments.logLevel ?? getenv("PLATFORM_PROXY_LOG_LEVEL").map({ String(cString: $0) }) {
    guard let level = LogLevel(name: name) else {
        Log.writeStandardError("platform-proxy: unknown log level '\(name)' (debug, info, warning or error)\n")
        exit(2)
    }
    Log.setMinimumLevel(level)
}
guard let command = arguments.command else {
    Log.writeStandardError(
        "platform-proxy: no command given\nRun 'platform-proxy help' for the commands and options.\n")
    exit(2)
}
if command == "serve" { GnuTLSRestart.restartIfInitialised() }
var location: ConfigLocation
switch ConfigLocation.resolve(explicit: arguments.config) {
case .success(let found): location = found
case .failure(let error):
    Log.writeStandardError("platform-proxy: \(error.message)\n")
    exit(2)
}
location.profile =
    arguments.profile
    ?? getenv(ConfigProfiles.environmentVariable).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
switch command {
case "serve":
    if case .invalidSwitch(let value) = LibcurlTuning.start() {
        Log.writeStandardError(
            "platform-proxy: \(LibcurlTuning.environmentVariable) must be on or off, not '\(value)'\n")
        exit(2)
    }
    exit(ProxyService.serve(config: location))
case "check-config":
    exit(ProxyService.checkConfig(config: location, schemaOnly: arguments.schemaOnly))
case "login":
    if arguments.journey || arguments.resume != nil {
        exit(
            JourneyCommand.login(
                config: location, journey: arguments.journeyName, answersFile: arguments.answers,
                resume: arguments.resume, provider: arguments.provider))
    }
    exit(LoginCommands.login(config: location, device: arguments.device, provider: arguments.provider))
case "status":
    exit(LoginCommands.status(config: location))
case "console":
    exit(ConsoleCommand.run(config: location))
default:
    exit(LoginCommands.logout(config: location, provider: arguments.provider))
}
