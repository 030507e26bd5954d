import Proxy

/// The help texts: the overview, and one per command.
enum Usage {
    static let overview = """
        platform-proxy \(ProxyService.version): a local HTTP/1.1 credential proxy.

        Usage:
          platform-proxy serve [--config FILE]                serve until SIGTERM/SIGINT
          platform-proxy check-config [--config FILE] [--schema-only]
                                                              validate a config, exit 1 on a problem
          platform-proxy login [--device] [--provider NAME] [--config FILE]
                                                              sign in through the running proxy (every
                                                              provider that needs it, or NAME)
          platform-proxy login --journey [NAME] [--answers FILE] | --resume URL
                                                              walk an AM journey in the terminal
          platform-proxy status [--config FILE]               login state and token expiry (no secrets;
                                                              one row per provider when there are several)
          platform-proxy console [--config FILE]              print the console page's URL (and open it
                                                              where a browser is available)
          platform-proxy logout [--provider NAME] [--config FILE]
                                                              revoke and forget the login (of every provider, or NAME)
          platform-proxy help [COMMAND]                       this text, or one command's
          platform-proxy --version

        Options:
          --config FILE        the JSON config; without it: $PLATFORM_PROXY_CONFIG, then
                               ./Config/platform-proxy.json, then /etc/platform-proxy/config.json
          --log-level LEVEL    debug, info (default), warning or error; or $PLATFORM_PROXY_LOG_LEVEL
          --profile NAME       apply the config's profile NAME (a JSON Merge Patch); or $PLATFORM_PROXY_PROFILE

        """

    static func command(_ name: String) -> String {
        switch name {
        case "serve":
            return """
                platform-proxy serve [--config FILE] [--profile NAME] [--log-level LEVEL]

                Serves the config's routes on its listen addresses until SIGTERM or SIGINT (then
                drains for shutdownGraceSeconds; a second signal exits at once). SIGHUP, or a change
                of the config file, reloads it; an invalid new config is logged and the old one stays.
                --profile NAME (or $PLATFORM_PROXY_PROFILE) applies the config's profile NAME, a JSON
                Merge Patch, at start and at every reload; without it the base config runs.
                Logs are JSON lines on stderr. Exit 1 when the config is invalid or a listener fails.

                """
        case "check-config":
            return """
                platform-proxy check-config [--config FILE] [--profile NAME] [--schema-only]

                Validates a config and prints the report on stdout: every problem with its JSON path
                (exit 1), or "ok" and any warnings (exit 0). Without --profile (or
                $PLATFORM_PROXY_PROFILE) it checks the base config and then every profile, each
                named; with it, that profile only. --schema-only does not read secret files or
                environment variables, for CI where they do not exist.

                """
        case "login":
            return """
                platform-proxy login [--device] [--provider NAME] [--config FILE]
                platform-proxy login --journey [NAME] [--answers FILE] [--provider NAME] [--config FILE]
                platform-proxy login --resume URL [--answers FILE] [--config FILE]

                Signs in through the running proxy (the config names its address and apiKey): prints
                the URL to open in a browser, or with --device the code to enter (OAuth device flow),
                then waits until the login completes. Exit 0 signed in, 1 not, 2 proxy unreachable.

                With several providers it signs into every provider that is not logged in: the
                browser ones in one phased login (one URL; after the first provider the others are
                tried silently with the identity provider's session), then each journey provider in
                the terminal, in turn; it ends with the status table. --provider NAME signs into
                that provider only (with --journey: which journey provider).

                With --journey (provider.grant "journey") it walks the AM tree NAME (default: the
                configured one) in the terminal: prompts with the server's labels, passwords and
                one-time codes read without echo, choices as a numbered list; an error is shown and
                the step asked again. --answers FILE (a JSON map of prompt or input name to value)
                runs without a terminal and fails on a prompt it cannot answer. A suspended journey
                is continued with --resume URL (the link that was sent).

                """
        case "status":
            return """
                platform-proxy status [--config FILE]

                Prints the running proxy's login state, subject and token expiry; never a secret.
                With several providers, a table with one row per provider. Exit 0 logged in (every
                provider), 1 not, 2 proxy unreachable or refusing the apiKey. Like login and logout,
                it dials the config's first listen address and reads no secret but its apiKey.

                """
        case "console":
            return """
                platform-proxy console [--config FILE]

                Prints the URL of the running proxy's console page (GET /_platform/console on the
                config's first listen address) and opens it with xdg-open when a desktop session has
                one. With apiKey set the page asks for the key itself; the command never prints it.
                Exit 0 printed, 2 when the config cannot be read or its first address is a Unix socket.

                """
        case "logout":
            return """
                platform-proxy logout [--provider NAME] [--config FILE]

                Revokes the refresh token where the provider allows it and forgets the login: of
                every provider, or of provider NAME only. A client_credentials provider fetches a
                new token at once (it has no login to wait for).

                """
        default: return overview
        }
    }
}
