"""The console page (docs/console.md) driven in real headless Chromium through selenium: sign in
through the Authlib IdP by clicking, watch the state change live, see forwarded requests listed
(route, status, never a token or a query), switch a route to mock replay, set and clear an
experiment override, log out; the same behind `apiKey`; and a cross-site page that frames or
fetches the console refused. Screenshots of every panel go to .build/console-screenshots/ (the
path is printed)."""

from __future__ import annotations

import http.server
import json
import os
import secrets
import shutil
import socketserver
import threading
import time
from pathlib import Path

import pytest

from credentials_support import (  # noqa: F401  (fixtures)
    free_port,
    http_call,
    idp_factory,
    launch,
    login,
    stored_tokens,
    wait_until,
    write_mock_dir,
)

from analytics_sink import AnalyticsSink  # noqa: E402
from test_analytics import analytics_block, unsigned_jwt  # noqa: E402
from test_forwarding import make_fwd, tokens  # noqa: E402,F401  (fixtures)
from test_reload import reload_with  # noqa: E402

# selenium comes with Tests/Integration/requirements.txt (scripts/setup.sh test): missing, the
# module fails to import rather than skipping the console's tests.
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PANELS = ("signin", "requests", "mocks", "experiments", "analytics", "config")
EXPERIMENTS = {"layout": {"variants": {"list": 20, "grid": 30, "cards": 50}}}
# Screenshots of every panel, kept past pytest's tmp directory rotation.
ARTIFACTS = Path(__file__).resolve().parents[2] / ".build" / "console-screenshots"
# The cross-site page's host name, resolved by Chromium itself to 127.0.0.1.
FOREIGN_HOST = "console-attacker.test"


@pytest.fixture
def browser(tmp_path):
    """One headless Chromium (no sandbox: the tests may run as root), its own profile directory,
    bounded timeouts; quit at teardown (which stops the chromedriver and Chromium it started)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("Chromium and chromedriver are missing: run scripts/setup.sh test")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--no-default-browser-check", "--window-size=1280,1000",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}",
                 f"--host-resolver-rules=MAP {FOREIGN_HOST} 127.0.0.1"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")),
                              options=options)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        driver.quit()


def until(driver, predicate, what: str, timeout: float = 10):
    # The page re-renders a panel when its data changes: an element found a moment ago may be gone.
    return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)) \
        .until(lambda d: predicate(d), message=what)


def by_label(driver, label: str):
    """The control whose accessible name (aria-label) is `label`: found as a person names it."""
    return driver.find_element(By.CSS_SELECTOR, f'[aria-label="{label}"]')


def text_of(driver, selector: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return found[0].text if found else ""


def screenshots(driver, directory: Path, prefix: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    saved = []
    for panel in PANELS:
        path = directory / f"{prefix}-{panel}.png"
        driver.find_element(By.ID, panel).screenshot(str(path))
        saved.append(path)
    whole = directory / f"{prefix}-page.png"
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(whole))
    saved.append(whole)
    print(f"console screenshots: {directory}")
    return saved


def console_proxy(start_proxy, idp, tmp_path, **extra):
    """The IdP's routes, plus `users`: an upstream route with a mock folder, its mode off."""
    mock_dir = write_mock_dir(tmp_path / "users-mock", {"hello": {"served": "from the mock"}})
    routes = [
        {"name": "api", "path": "/api/", "upstream": idp.issuer + "/api/", "credential": "access_token", "timeoutSeconds": 10},
        {"name": "users", "path": "/users/", "upstream": idp.issuer + "/.well-known/", "credential": "none",
         "mock": {"directory": str(mock_dir), "mode": "off"}},
    ]
    return launch(start_proxy, idp, tmp_path, routes=routes, extra={"experiments": EXPERIMENTS, **extra})


def open_console(driver, proxy) -> dict:
    """Loads the page; returns its Navigation Timing entry."""
    driver.get(proxy.base + "/_platform/console")
    until(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
          or d.find_element(By.ID, "key-form").is_displayed(), "the console loaded")
    return driver.execute_script("return performance.getEntriesByType('navigation')[0].toJSON()")


def _strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def wait_provider_state(driver, state: str):
    until(driver, lambda d: text_of(d, "[data-provider-state]") == state, f"the sign-in panel shows {state}")


def drive_after_sign_in(driver, proxy, key_headers: dict, artifacts: Path, prefix: str):
    """What both tests check once signed in: a forwarded request listed without a secret, the
    detail view, mock replay, an experiment override set and cleared, log out."""
    secrets_held = [v for v in _strings(stored_tokens(proxy)) if len(v) >= 16]
    assert secrets_held, "the login stored tokens"
    secret_query = "secret-" + secrets.token_hex(8)

    r = http_call(proxy.base + f"/api/console-check?token={secret_query}", headers=key_headers)
    assert r.status == 200, r
    row = '#requests-rows tr[data-route="api"][data-status="200"]'
    until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, row), "the forwarded request listed with its route and status")
    cells = driver.find_element(By.CSS_SELECTOR, row).text
    assert "/api/console-check" in cells and "injected" in cells, cells
    driver.find_element(By.CSS_SELECTOR, row + " button").click()
    until(driver, lambda d: "injected on every hop" in d.find_element(By.ID, "request-detail").text, "the detail view")
    source = driver.page_source
    assert secret_query not in source, "a query string reached the page"
    for value in secrets_held:
        assert value not in source, "a stored token reached the page"
    assert "refresh_token" not in source and "Bearer" not in source

    # Mocks: the route's control is named after it; replay serves the next request from the folder.
    before = http_call(proxy.base + "/users/hello", headers=key_headers)
    assert before.status == 404, before  # the IdP has no /.well-known/hello
    Select(by_label(driver, "Mock mode of route users")).select_by_value("replay")
    until(driver, lambda d: text_of(d, '[data-mock-mode="users"]') == "replay", "the mock mode shown as replay")
    after = http_call(proxy.base + "/users/hello", headers=key_headers)
    assert after.status == 200 and json.loads(after.body) == {"served": "from the mock"}, after
    mock_row = '#requests-rows tr[data-route="users"][data-status="200"]'
    until(driver, lambda d: "mock" in text_of(d, mock_row), "the mock answer listed")

    # Experiments: set an override by the experiment's named controls, then clear it.
    current = text_of(driver, '[data-experiment-variant="layout"]')
    other = next(v for v in EXPERIMENTS["layout"]["variants"] if v != current)
    Select(by_label(driver, "Override variant of experiment layout")).select_by_value(other)
    by_label(driver, "Set the override of experiment layout").click()
    until(driver, lambda d: text_of(d, '[data-experiment-reason="layout"]') == "override"
          and text_of(d, '[data-experiment-variant="layout"]') == other, "the override shown")
    api = http_call(proxy.base + "/_platform/experiments/layout", headers=key_headers)
    assert json.loads(api.body)["reason"] == "override" and json.loads(api.body)["variant"] == other

    screenshots(driver, artifacts, prefix)

    by_label(driver, "Clear the override of experiment layout").click()
    until(driver, lambda d: text_of(d, '[data-experiment-reason="layout"]') != "override", "the override cleared")
    api = http_call(proxy.base + "/_platform/experiments/layout", headers=key_headers)
    assert json.loads(api.body)["reason"] != "override"

    name = driver.find_element(By.CSS_SELECTOR, "[data-provider-state]").get_attribute("data-provider-state")
    by_label(driver, f"Log out of {name}").click()
    wait_provider_state(driver, "logged_out")
    assert driver.get_cookies() == [], "the console sets no cookie"


@pytest.fixture
def sink():
    s = AnalyticsSink().start()
    yield s
    s.stop()


def test_console_signs_in_lists_requests_switches_mocks_and_experiments_live(start_proxy, idp_factory, browser, sink,
                                                                               tmp_path):
    idp = idp_factory()
    proxy = console_proxy(start_proxy, idp, tmp_path, analytics=analytics_block(sink))
    page = http_call(proxy.base + "/_platform/console")
    assert page.status == 200, page
    csp = page.header("content-security-policy")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, csp
    weight = sum(len(http_call(proxy.base + p).body) for p in
                 ("/_platform/console", "/_platform/console/app.js", "/_platform/console/app.css"))
    print(f"console page weight: {weight} bytes")
    assert weight < 100 * 1024

    # The first document of a fresh Chromium pays for its renderer's start; the page's own
    # cost is measured on the next load (Navigation Timing: navigation start to load end).
    # Other work on this shared machine moves single loads: the best of three warm loads is the page's.
    first = open_console(browser, proxy)
    loads = [open_console(browser, proxy) for _ in range(3)]
    times = [t["loadEventEnd"] - t["startTime"] for t in loads]
    render_ms = min(times)
    print(f"console render (navigation start to load end): best {render_ms:.1f} ms of "
          f"{', '.join(f'{t:.1f}' for t in times)} (first load in a fresh browser: "
          f"{first['loadEventEnd'] - first['startTime']:.1f} ms)")
    assert 0 < render_ms < 200, loads
    wait_provider_state(browser, "logged_out")
    for panel in PANELS:
        assert browser.find_element(By.ID, panel).is_displayed()

    # Sign in by clicking: the IdP approves at once and sends the tab back to the callback;
    # the console tab sees the state change over its event stream, without a reload.
    console_tab = browser.current_window_handle
    name = browser.find_element(By.CSS_SELECTOR, "[data-provider-state]").get_attribute("data-provider-state")
    by_label(browser, f"Log in to {name} in the browser").click()
    until(browser, lambda d: len(d.window_handles) == 2, "the login tab opened")
    login_tab = next(h for h in browser.window_handles if h != console_tab)
    browser.switch_to.window(login_tab)
    until(browser, lambda d: "/_platform/callback" in d.current_url, "the callback reached", timeout=15)
    browser.close()
    browser.switch_to.window(console_tab)
    wait_provider_state(browser, "logged_in")

    # Analytics: an event the app posts is listed with the queue depth.
    r = http_call(proxy.base + "/_platform/analytics/events", method="POST",
                  body=json.dumps({"events": [{"key": "console.check"}]}).encode(), headers={"Content-Type": "application/json"})
    assert r.status == 202, r
    until(browser, lambda d: "console.check" in text_of(d, "[data-analytics-latest]"), "the event listed")
    assert text_of(browser, "[data-analytics-depth]") == "1"

    drive_after_sign_in(browser, proxy, {}, ARTIFACTS, "open")

    # Config: a refused reload shows its problems, live.
    broken = dict(proxy.config, routes=[{"name": "api", "path": "no-slash", "upstream": idp.issuer + "/api/"}])
    reload_with(proxy.server, broken)
    until(browser, lambda d: "routes" in text_of(d, "[data-reload-errors]"), "the reload errors shown", timeout=15)
    assert "1 refused" in browser.find_element(By.ID, "config").text


def test_console_behind_api_key_asks_for_it_once_and_signs_in_with_a_device_code(start_proxy, idp_factory, browser, tmp_path):
    idp = idp_factory(device_interval=1)
    key = "console-key-" + secrets.token_hex(12)
    proxy = console_proxy(start_proxy, idp, tmp_path, apiKey=key)
    headers = {"X-Proxy-Key": key}
    assert http_call(proxy.base + "/_platform/console/state").status == 401, "the page's data needs the key"

    open_console(browser, proxy)
    form = browser.find_element(By.ID, "key-form")
    until(browser, lambda d: form.is_displayed(), "the page asks for the key")
    browser.find_element(By.CSS_SELECTOR, "label[for=key-input]")  # a labelled field
    browser.find_element(By.ID, "key-input").send_keys(key)
    browser.find_element(By.XPATH, "//button[normalize-space()='Use this proxy key']").click()
    wait_provider_state(browser, "logged_out")
    assert key not in browser.page_source, "the key is not written into the page"

    name = browser.find_element(By.CSS_SELECTOR, "[data-provider-state]").get_attribute("data-provider-state")
    by_label(browser, f"Log in to {name} with a device code").click()
    code_box = until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'[aria-label="Device code for {name}"]'),
                     "the device code shown")[0]
    code = code_box.text
    link = by_label(browser, f"Open the sign-in page of {name}").get_attribute("href")
    assert link.startswith(idp.issuer), link
    # The person opens the link and enters the code at the IdP.
    console_tab = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(link if "user_code=" in link else link + "?user_code=" + code)
    assert "Device approved" in browser.page_source
    browser.close()
    browser.switch_to.window(console_tab)
    wait_provider_state(browser, "logged_in")

    drive_after_sign_in(browser, proxy, headers, ARTIFACTS, "apikey")
    # Reloaded, the tab still has its key: asked once.
    browser.refresh()
    until(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "reloaded")
    assert not browser.find_element(By.ID, "key-form").is_displayed()


class _ForeignPage(http.server.BaseHTTPRequestHandler):
    """A page on another site that frames the console and fetches its data."""
    body = b""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_console_refuses_a_cross_site_page_framing_or_fetching_it(start_proxy, idp_factory, browser, tmp_path):
    idp = idp_factory()
    proxy = console_proxy(start_proxy, idp, tmp_path)
    assert http_call(proxy.base + "/_platform/console").status == 200
    target = proxy.base + "/_platform/console"
    _ForeignPage.body = f"""<!doctype html><title>elsewhere</title>
<iframe id="framed" src="{target}"></iframe>
<script>
fetch("{target}", {{mode: "no-cors"}}).finally(() => fetch("{proxy.base}/_platform/console/state", {{mode: "no-cors"}}))
  .finally(() => {{ document.title = "done"; }});
</script>""".encode()
    server = socketserver.TCPServer(("127.0.0.1", 0), _ForeignPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        browser.get(f"http://{FOREIGN_HOST}:{server.server_address[1]}/")
        until(browser, lambda d: d.title == "done", "the foreign page ran")

        def refused():
            lines = [e for e in proxy.server.log_events("request") if e.get("path", "").startswith("/_platform/console")]
            return lines if len([e for e in lines if e.get("status") == 403]) >= 3 else None
        lines = wait_until(refused, timeout=5, what="the frame and both fetches refused")
        served = [e for e in lines if e["status"] != 403]
        assert len(served) == 1, f"only the test's own first request is served: {served}"
        frame = browser.find_element(By.ID, "framed")
        browser.switch_to.frame(frame)
        assert "platform-proxy console" not in browser.page_source
    finally:
        browser.switch_to.default_content()
        server.shutdown()
        server.server_close()


def test_console_command_prints_the_url_and_opens_it_only_where_a_browser_is(tmp_path):
    from proxy import require_binary
    import subprocess

    port = free_port()
    config = tmp_path / "proxy.json"
    config.write_text(json.dumps({"listen": [f"127.0.0.1:{port}"], "apiKey": "console-command-key",
                                  "routes": [{"name": "open", "path": "/open/", "upstream": "http://127.0.0.1:9/",
                                              "credential": "none"}]}))
    url = f"http://127.0.0.1:{port}/_platform/console"
    # A stand-in for the desktop's opener: records what it was asked to open.
    opened = tmp_path / "opened.txt"
    tools = tmp_path / "bin"
    tools.mkdir()
    opener = tools / "xdg-open"
    opener.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {opened}\n")
    opener.chmod(0o755)

    def run(env):
        return subprocess.run([str(require_binary()), "console", "--config", str(config)], capture_output=True,
                              text=True, timeout=10, env={"PATH": str(tools), "HOME": str(tmp_path), **env})

    headless = run({})
    assert headless.returncode == 0, headless
    assert headless.stdout.splitlines()[0] == url, headless.stdout
    assert "console-command-key" not in headless.stdout + headless.stderr, "the key is never printed"
    assert not opened.exists(), "no display: nothing is opened"

    desktop = run({"DISPLAY": ":0"})
    assert desktop.returncode == 0 and desktop.stdout.splitlines()[0] == url, desktop
    wait_until(lambda: opened.exists() and opened.read_text() == url, timeout=5, what="xdg-open given the URL")

    no_opener = subprocess.run([str(require_binary()), "console", "--config", str(config)], capture_output=True, text=True,
                               timeout=10, env={"PATH": str(tmp_path / "empty"), "DISPLAY": ":0", "HOME": str(tmp_path)})
    assert no_opener.returncode == 0 and no_opener.stdout.splitlines()[0] == url, no_opener


def test_console_mock_switch_is_disabled_and_refused_under_the_release_profile(start_proxy, browser, tmp_path):
    from proxy import base_config

    folder = tmp_path / "off-folder"
    folder.mkdir()
    config = base_config(None, routes=[{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/",
                                        "mock": {"directory": str(folder), "mode": "off"}}],
                         profiles={"release": {}})
    server = start_proxy(config=config, env={"PLATFORM_PROXY_PROFILE": "release"})
    base = f"http://127.0.0.1:{server.port}"
    browser.get(base + "/_platform/console")
    until(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "the console loaded")
    control = by_label(browser, "Mock mode of route api")
    assert not control.is_enabled(), "the switch is disabled under release"
    assert "refused under the release profile" in browser.find_element(By.ID, "mocks").text
    assert "release" in browser.find_element(By.ID, "config").text
    # The page's own request, forced: the endpoint refuses it as it refuses any client.
    status = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/_platform/mock', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                  body: JSON.stringify({route: 'api', mode: 'replay'})}).then((r) => done(r.status));
    """)
    assert status == 403
    assert text_of(browser, '[data-mock-mode="api"]') == "off"


def test_console_request_list_says_why_credentials_were_stripped_and_counts_hops_and_masked_echoes(make_fwd):
    """No browser: the records the page shows, as `/_platform/console/requests` gives them."""
    from test_forwarding import q

    fwd = make_fwd()
    echoed = fwd.get("/api/echo-me?secret=query-value")
    assert echoed.status == 200, echoed
    assert fwd.tokens.access not in echoed.body.decode(), "the echo was masked"
    redirected = fwd.get(f"/api/redirect?status=302&to={q(fwd.foreign.url('/landing'))}")
    assert redirected.status == 200, redirected

    def listed():
        reply = fwd.proxy.get("/_platform/console/requests")
        records = {r["path"]: r for r in reply.json()["requests"]}
        return (reply, records) if {"/api/echo-me", "/api/redirect"} <= records.keys() else None
    reply, records = wait_until(listed, timeout=5, what="both requests listed")
    echo = records["/api/echo-me"]
    assert (echo["route"], echo["status"], echo["credentials"], echo["redirects"]) == ("api", 200, "injected", 0), echo
    assert echo["maskedEchoes"] >= 1 and echo["upstream"] == fwd.main.url("").rstrip("/"), echo
    hop = records["/api/redirect"]
    assert (hop["credentials"], hop["redirects"], hop["upstream"]) == \
        ("not_a_credential_host", 1, fwd.foreign.url("").rstrip("/")), hop
    text = reply.body.decode()
    for secret in fwd.tokens.all:
        assert secret not in text
    assert "query-value" not in text and "landing" not in text and "?" not in text


def test_console_shows_why_analytics_uploads_fail_until_one_succeeds(start_proxy, idp_factory, browser, sink, tmp_path):
    """The analytics panel's last upload alone hid an endpoint that refused every batch: the
    latest problem is shown, in words, until an upload goes through."""
    idp = idp_factory()
    sink.always(503)
    proxy = console_proxy(start_proxy, idp, tmp_path, analytics=analytics_block(sink, credential="none"))
    login(proxy)  # events are attributed to the signed-in subject
    open_console(browser, proxy)
    r = http_call(proxy.base + "/_platform/analytics/events", method="POST",
                  body=json.dumps({"events": [{"key": "console.upload"}]}).encode(),
                  headers={"Content-Type": "application/json"})
    assert r.status == 202, r
    http_call(proxy.base + "/_platform/analytics/flush", method="POST", body=b"{}",
              headers={"Content-Type": "application/json"})
    until(browser, lambda d: "HTTP 503" in text_of(d, "[data-analytics-problem]"), "the upload problem shown")
    assert sink.uploads and all(u.status == 503 for u in sink.uploads)

    sink.always(200)
    http_call(proxy.base + "/_platform/analytics/flush", method="POST", body=b"{}",
              headers={"Content-Type": "application/json"})
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-analytics-problem]"),
          "the problem cleared by an upload that went through")
    assert text_of(browser, "[data-analytics-depth]") == "0"


def test_console_demo_login_button_signs_in_with_the_configured_demo_tokens(start_proxy, idp_factory, browser, tmp_path):
    """A provider with `demo` gets a Demo login button; clicking it signs in with the demo
    tokens (shown live), and the forwarded request carries the demo token, not shown on the page."""
    idp = idp_factory()
    demo_access = "demo-access-" + secrets.token_hex(12)
    demo_id = unsigned_jwt({"sub": "demo-user", "exp": int(time.time()) + 600})
    mock_dir = write_mock_dir(tmp_path / "users-mock", {"hello": {"served": "from the mock"}})
    routes = [
        {"name": "api", "path": "/api/", "upstream": idp.issuer + "/api/", "credential": "access_token", "timeoutSeconds": 10},
        {"name": "users", "path": "/users/", "upstream": idp.issuer + "/.well-known/", "credential": "none",
         "mock": {"directory": str(mock_dir), "mode": "off"}},
    ]
    proxy = launch(start_proxy, idp, tmp_path, routes=routes, extra={"experiments": EXPERIMENTS}, provider_extra={
        "demo": {"accessToken": demo_access, "idToken": demo_id, "expiresInSeconds": 600}})
    open_console(browser, proxy)
    wait_provider_state(browser, "logged_out")
    name = browser.find_element(By.CSS_SELECTOR, "[data-provider-state]").get_attribute("data-provider-state")
    by_label(browser, f"Demo login to {name}").click()
    wait_provider_state(browser, "logged_in")
    assert "demo-user" in browser.find_element(By.ID, "signin").text
    # The IdP's resource refuses a token it did not issue; what matters is that one was injected.
    http_call(proxy.base + "/api/console-demo")
    row = '#requests-rows tr[data-route="api"]'
    until(browser, lambda d: "injected" in text_of(d, row), "the request listed with its credentials injected")
    assert demo_access not in browser.page_source, "the demo token reached the page"
