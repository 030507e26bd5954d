import Config
import EventLoop
import Glibc
import Proxy

/// Command-line parsing and wiring only; the work lives in the Proxy module.
let usage = """
    platform-proxy \(ProxyService.version): a local HTTP/1.1 credential proxy.

    Usage:
      platform-proxy serve [--config FILE]          serve (default config: \(ProxyConfiguration.defaultPath))
      platform-proxy check-config [--config FILE]   validate a config, print every problem, exit 1 on error
      platform-proxy login [--device] [--config FILE]  sign in through the running proxy, wait until done
      platform-proxy status [--config FILE]         login state and token expiry (no secrets)
      platform-proxy logout [--config FILE]         revoke and forget the login
      platform-proxy --version | --help

    Options:
      --config FILE       the JSON config (relative paths in it resolve against its folder)
      --log-level LEVEL   debug, info (default), warning or error; or PLATFORM_PROXY_LOG_LEVEL

    """

func fail(_ message: String) -> Never {
    Log.writeStandardError("platform-proxy: \(message)\n\n\(usage)")
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var configPath = ProxyConfiguration.defaultPath
var logLevel = getenv("PLATFORM_PROXY_LOG_LEVEL").map { String(cString: $0) }
var command: String?
var device = false
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    case "--version":
        print("platform-proxy \(ProxyService.version)")
        exit(0)
    case "--config":
        guard !arguments.isEmpty else { fail("--config needs a file") }
        configPath = arguments.removeFirst()
    case "--device":
        device = true
    case "--log-level":
        guard !arguments.isEmpty else { fail("--log-level needs a level") }
        logLevel = arguments.removeFirst()
    default:
        guard command == nil, !argument.hasPrefix("-") else { fail("unexpected argument '\(argument)'") }
        command = argument
    }
}
if let logLevel {
    guard let level = LogLevel(name: logLevel) else { fail("unknown log level '\(logLevel)'") }
    Log.setMinimumLevel(level)
}
switch command {
case "serve":
    exit(ProxyService.serve(configPath: configPath))
case "check-config":
    exit(ProxyService.checkConfig(configPath: configPath))
case "login":
    exit(LoginCommands.login(configPath: configPath, device: device))
case "status":
    exit(LoginCommands.status(configPath: configPath))
case "logout":
    exit(LoginCommands.logout(configPath: configPath))
case nil:
    fail("no command given")
case let other?:
    fail("unknown command '\(other)'")
}
