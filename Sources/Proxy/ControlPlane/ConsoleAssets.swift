/// The console page's files (docs/console.md), compiled into the binary: no file to install,
/// nothing fetched from elsewhere. The script and the style sheet are separate files so the
/// page's `Content-Security-Policy` allows `'self'` only, with no inline script or style.
enum ConsoleAssets {
    static let html: [UInt8] = Array(htmlText.utf8)
    static let script: [UInt8] = Array(scriptText.utf8)
    static let style: [UInt8] = Array(styleText.utf8)

    private static let htmlText = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>platform-proxy console</title>
        <link rel="stylesheet" href="/_platform/console/app.css">
        <script src="/_platform/console/app.js" defer></script>
        </head>
        <body>
        <header>
        <h1>platform-proxy console</h1>
        <p id="status" role="status" aria-live="polite">Loading…</p>
        </header>
        <form id="key-form" hidden aria-labelledby="key-title">
        <h2 id="key-title">Proxy key</h2>
        <p>This proxy requires its key (<code>apiKey</code>). The page keeps it in this tab only and sends it as <code>X-Proxy-Key</code> on its own requests.</p>
        <label for="key-input">Proxy key</label>
        <input id="key-input" type="password" autocomplete="off" required>
        <button type="submit">Use this proxy key</button>
        </form>
        <main id="panels">
        <section id="signin" aria-labelledby="signin-title">
        <h2 id="signin-title">Sign-in</h2>
        <div id="signin-body"></div>
        <div id="device-code" aria-live="polite"></div>
        </section>
        <section id="requests" aria-labelledby="requests-title">
        <h2 id="requests-title">Requests</h2>
        <p><label for="requests-filter">Filter requests</label>
        <input id="requests-filter" type="search" placeholder="route, path, method or status"></p>
        <div class="scroll">
        <table>
        <caption>Recent exchanges, newest first (no query, token, cookie or body is ever kept)</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Method</th><th scope="col">Path</th><th scope="col">Route</th><th scope="col">Status</th><th scope="col">ms</th><th scope="col">Upstream</th><th scope="col">Credentials</th></tr></thead>
        <tbody id="requests-rows"></tbody>
        </table>
        </div>
        <div id="request-detail" aria-live="polite"></div>
        </section>
        <section id="mocks" aria-labelledby="mocks-title">
        <h2 id="mocks-title">Mocks</h2>
        <p id="mocks-global"></p>
        <div id="mocks-body"></div>
        </section>
        <section id="experiments" aria-labelledby="experiments-title">
        <h2 id="experiments-title">Experiments</h2>
        <div id="experiments-body"></div>
        </section>
        <section id="analytics" aria-labelledby="analytics-title">
        <h2 id="analytics-title">Analytics</h2>
        <div id="analytics-body"></div>
        </section>
        <section id="config" aria-labelledby="config-title">
        <h2 id="config-title">Config</h2>
        <div id="config-body"></div>
        </section>
        </main>
        </body>
        </html>
        """#

    private static let styleText = #"""
        :root { color-scheme: light dark; --line: #8884; --accent: #2563eb; --bad: #b91c1c; --good: #15803d; }
        * { box-sizing: border-box; }
        body { font: 14px/1.4 system-ui, sans-serif; margin: 0; padding: 0 1rem 2rem; }
        header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
        h1 { font-size: 1.3rem; }
        h2 { font-size: 1.05rem; margin: 0 0 .5rem; }
        main { display: grid; grid-template-columns: repeat(auto-fit, minmax(26rem, 1fr)); gap: 1rem; }
        section, #key-form { border: 1px solid var(--line); border-radius: 6px; padding: .75rem; min-width: 0; }
        #requests { grid-column: 1 / -1; }
        .scroll { overflow: auto; max-height: 24rem; }
        table { border-collapse: collapse; width: 100%; }
        caption { text-align: left; font-size: .85rem; opacity: .8; padding-bottom: .25rem; }
        th, td { text-align: left; padding: .2rem .4rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
        td.path { white-space: normal; word-break: break-all; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem .75rem; margin: .25rem 0 .5rem; }
        dt { opacity: .75; }
        dd { margin: 0; word-break: break-all; }
        button, select, input { font: inherit; padding: .2rem .5rem; }
        button { cursor: pointer; }
        button.link { border: 0; background: none; padding: 0; color: var(--accent); text-decoration: underline; text-align: left; }
        a.button { display: inline-block; padding: .2rem .5rem; border: 1px solid var(--accent); border-radius: 4px; text-decoration: none; color: var(--accent); }
        .actions { display: flex; gap: .5rem; flex-wrap: wrap; margin: .25rem 0 .75rem; }
        .state-logged_in { color: var(--good); font-weight: 600; }
        .state-logged_out, .state-expired, .state-error { color: var(--bad); font-weight: 600; }
        .status-5, .status-4 { color: var(--bad); }
        .error { color: var(--bad); }
        .code { font: 600 1.4rem ui-monospace, monospace; letter-spacing: .1em; }
        .note { opacity: .75; font-size: .85rem; }
        """#
}
