"""Several identity providers (``providers``) and the phased login, through the real binary:
two providers at one test IdP (the second login is silent: the IdP shows no second form), a
second IdP (its own form), a refusal (access_denied) that leaves the others signed in, and one
provider's logout or outage that never touches the other's routes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

from credentials_support import (CredProxy, EventStream, SCOPES, assert_no_secrets_logged, free_port, http_call,  # noqa: F401
                                 idp_factory, provider_for, wait_until)
from proxy import binary_path

PING_CLIENT = "ping-client"


class Browser:
    """Follows redirects like a browser, keeps each host's cookies, and fills in the IdP's login
    form when one is shown (a user typing a password). ``visited`` lists every URL requested."""

    def __init__(self):
        self.cookies: dict[str, dict[str, str]] = {}
        self.visited: list[str] = []
        self.forms: list[str] = []

    def _call(self, url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
        netloc = urlsplit(url).netloc
        jar = self.cookies.setdefault(netloc, {})
        hdrs = dict(headers or {})
        if jar:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        self.visited.append(url)
        reply = http_call(url, method=method, body=body, headers=hdrs)
        cookie = reply.header("set-cookie")
        if cookie:
            name, _, rest = cookie.partition("=")
            jar[name.strip()] = rest.split(";", 1)[0]
        return reply

    def open(self, url: str, max_steps: int = 20):
        reply = self._call(url)
        for _ in range(max_steps):
            if reply.status in (301, 302, 303, 307) and reply.header("location"):
                url = urljoin(url, reply.header("location"))
                reply = self._call(url)
                continue
            form = re.search(rb'<form method=post action=(/login)>.*?name=next value="([^"]*)"', reply.body, re.S)
            if reply.status == 200 and form:
                self.forms.append(url)
                action = urljoin(url, form.group(1).decode())
                body = urlencode({"next": unescape(form.group(2).decode()), "username": "testuser",
                                  "password": "pw"}).encode()
                url = action
                reply = self._call(action, "POST", body, {"Content-Type": "application/x-www-form-urlencoded"})
                continue
            return reply
        raise AssertionError(f"too many redirects: {self.visited}")

    def authorize_requests(self, issuer: str) -> list[dict]:
        """The query of every authorization request sent to `issuer`, in order."""
        return [{k: v[0] for k, v in parse_qs(urlsplit(u).query).items()}
                for u in self.visited if u.startswith(issuer + "/authorize")]


def add_ping_client(idp):
    idp.control.add_client(PING_CLIENT)


def start_two(start_proxy, tmp_path, platform_idp, ping_idp, *, name="proxy", state_dir: Path | None = None,
              port: int | None = None, extra: dict | None = None) -> CredProxy:
    """A proxy with providers platform (public client at its IdP) and ping (ping-client), a
    route to each IdP's protected /api/, and one route without credentials."""
    port = port or free_port()
    state_dir = state_dir or tmp_path / f"state-{name}"
    config = {
        "listen": [f"127.0.0.1:{port}"],
        "stateDirectory": str(state_dir),
        "providers": {
            "platform": provider_for(platform_idp, port, refresh_before=2),
            "ping": provider_for(ping_idp, port, refresh_before=2, clientID=PING_CLIENT),
        },
        "gate": {"mode": "reject", "waitSeconds": 10},
        "routes": [
            {"name": "platform-api", "path": "/api/", "upstream": platform_idp.issuer + "/api/",
             "credential": "access_token", "provider": "platform", "retryOn401": True, "timeoutSeconds": 10},
            {"name": "ping-api", "path": "/ping/", "upstream": ping_idp.issuer + "/api/",
             "credential": "access_token", "provider": "ping", "retryOn401": True, "timeoutSeconds": 10},
            {"name": "open", "path": "/open/", "upstream": platform_idp.issuer + "/.well-known/", "timeoutSeconds": 10},
        ],
        **(extra or {}),
    }
    server = start_proxy(config, name=name)
    wait_until(lambda: len(server.log_events("provider_discovered")) >= 2, timeout=5, what="both providers discovered")
    return CredProxy(server, port, state_dir, config)


def providers_state(p: CredProxy) -> dict:
    return {name: fields["state"] for name, fields in p.auth()["providers"].items()}


def test_two_providers_at_one_idp_second_login_is_silent(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    idp.control.require_login_form()
    p = start_two(start_proxy, tmp_path, idp, idp)
    assert providers_state(p) == {"platform": "logged_out", "ping": "logged_out"}

    browser = Browser()
    final = browser.open(p.base + "/_platform/login")
    assert final.status == 200, final
    assert b"Signed in: platform, ping." in final.body, final.body
    # One form for the whole chain: the second provider rode on the IdP's session cookie.
    assert idp.control.login_forms() == 1
    requests = browser.authorize_requests(idp.issuer)
    assert [r["client_id"] for r in requests] == [idp.public_client_id, idp.public_client_id, PING_CLIENT]
    assert "prompt" not in requests[0] and requests[2]["prompt"] == "none"
    # PKCE and state per provider.
    assert requests[0]["state"] != requests[2]["state"]
    assert requests[0]["code_challenge"] != requests[2]["code_challenge"]

    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")
    assert p.call("/api/x").status == 200
    assert p.call("/ping/x").status == 200
    # Each provider has its own token store file.
    assert (p.state_dir / "tokens-platform.json").exists() and (p.state_dir / "tokens-ping.json").exists()
    assert_no_secrets_logged(idp, [p])


def test_second_idp_shows_its_own_form_after_a_silent_try(start_proxy, idp_factory, tmp_path):
    first, second = idp_factory(access_ttl=120), idp_factory(access_ttl=120)
    add_ping_client(second)
    first.control.require_login_form()
    second.control.require_login_form()
    p = start_two(start_proxy, tmp_path, first, second)

    browser = Browser()
    final = browser.open(p.base + "/_platform/login")
    assert final.status == 200 and b"Signed in: platform, ping." in final.body, final.body
    assert first.control.login_forms() == 1 and second.control.login_forms() == 1
    # At the second IdP: prompt=none first (no session there: login_required), then interactively.
    tries = browser.authorize_requests(second.issuer)
    assert tries[0].get("prompt") == "none" and "prompt" not in tries[1], tries
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")


def test_one_provider_refusing_leaves_the_others_signed_in_and_is_reported(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    idp.control.deny_clients(PING_CLIENT)
    p = start_two(start_proxy, tmp_path, idp, idp)

    final = Browser().open(p.base + "/_platform/login")
    assert final.status == 200, final
    assert b"Partly signed in" in final.body and b"Signed in: platform." in final.body, final.body
    assert b"Not signed in: ping" in final.body and b"access_denied" in final.body, final.body
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_out"}, timeout=5,
               what="platform in, ping out")
    assert p.call("/api/x").status == 200
    r = p.call("/ping/x")
    assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
    assert r.json()["login"] == "/_platform/login?provider=ping" and r.json()["provider"] == "ping", r
    assert p.server.log_events("phased_login_finished")


def test_one_providers_logout_or_outage_never_touches_the_others_routes(start_proxy, idp_factory, tmp_path):
    first, second = idp_factory(access_ttl=120), idp_factory(access_ttl=120)
    add_ping_client(second)
    p = start_two(start_proxy, tmp_path, first, second)
    final = Browser().open(p.base + "/_platform/login")
    assert final.status == 200, final
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")

    # Logging out of ping ends ping only.
    r = p.call("/_platform/logout?provider=ping", method="POST")
    assert r.status == 200 and r.json()["providers"] == {"ping": {"revoked": True}}, r
    assert providers_state(p) == {"platform": "logged_in", "ping": "logged_out"}
    assert p.call("/api/x").status == 200
    gated = p.call("/ping/x")
    assert gated.status == 401 and gated.json()["login"] == "/_platform/login?provider=ping", gated
    assert not (p.state_dir / "tokens-ping.json").exists() or wait_until(
        lambda: not (p.state_dir / "tokens-ping.json").exists(), timeout=3, what="ping's token file removed")
    assert (p.state_dir / "tokens-platform.json").exists()

    # Logging in to ping alone, then its IdP going away: platform's routes keep working.
    assert Browser().open(p.base + "/_platform/login?provider=ping").status == 200
    wait_until(lambda: providers_state(p)["ping"] == "logged_in", timeout=5, what="ping logged in again")
    second.control.offline()
    for _ in range(5):
        assert p.call("/api/x").status == 200
    assert p.call("/ping/x").status == 502
    assert p.call("/_platform/userinfo?provider=platform").status == 200

    # Unknown provider names are JSON errors naming them.
    for path, method in (("/_platform/userinfo?provider=nope", "GET"), ("/_platform/logout?provider=nope", "POST"),
                         ("/_platform/login?provider=nope", "GET")):
        r = p.call(path, method=method)
        assert r.status == 404 and r.json()["error"] == "unknown_provider" and "nope" in r.json()["message"], r

    # Logout without a parameter ends every login.
    r = p.call("/_platform/logout", method="POST")
    assert r.status == 200 and set(r.json()["providers"]) == {"platform", "ping"}, r
    assert providers_state(p) == {"platform": "logged_out", "ping": "logged_out"}


def test_auth_events_name_their_provider_and_metrics_carry_it(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    stream = EventStream(p)
    try:
        stream.wait_for(lambda events: len(events) >= 2, what="one state event per provider")
        assert {e["provider"] for e in stream.events[:2]} == {"platform", "ping"}
        assert p.call("/ping/x").status == 401
        assert Browser().open(p.base + "/_platform/login?provider=ping").status == 200
        stream.wait_for(lambda events: any(e["provider"] == "ping" and e["loggedIn"] for e in events),
                        what="ping logged_in event")
        assert not any(e["provider"] == "platform" and e["loggedIn"] for e in stream.events)
    finally:
        stream.close()
    metrics = p.call("/_platform/metrics").body.decode()
    assert 'platform_proxy_gate_held_total{route="ping-api",provider="ping"} 1' in metrics, metrics
    assert 'platform_proxy_token_refreshes_total{provider="platform",outcome="ok"}' in metrics
    assert 'platform_proxy_token_refreshes_total{provider="ping",outcome="ok"}' in metrics
    assert any(e.get("provider") == "ping" for e in p.server.log_events("logged_in"))
    # Request lines are buffered per loop (written within a second).
    wait_until(lambda: any(e.get("route") == "ping-api" and e.get("provider") == "ping"
                           for e in p.server.log_events("request")), timeout=5, what="a request line naming ping")


def run_cli(args: list[str], config: dict, tmp_path, timeout: float = 30) -> subprocess.CompletedProcess:
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(config))
    return subprocess.run([binary_path(), *args, "--config", str(path)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_cli_login_signs_into_every_provider_and_status_prints_a_table(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    idp.control.require_login_form()
    p = start_two(start_proxy, tmp_path, idp, idp)

    status = run_cli(["status"], p.config, tmp_path)
    assert status.returncode == 1, status
    rows = status.stdout.splitlines()
    assert rows[0].split()[:3] == ["PROVIDER", "GRANT", "STATE"], status.stdout
    assert rows[1].split()[:3] == ["platform", "authorization_code", "logged_out"], status.stdout
    assert rows[2].split()[:3] == ["ping", "authorization_code", "logged_out"], status.stdout

    waiting = subprocess.Popen([binary_path(), "login", "--config", str(tmp_path / "cli-config.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        first = waiting.stdout.readline()
        assert "sign in to platform, ping" in first, first
        url = waiting.stdout.readline().strip()
        assert url == f"{p.base}/_platform/login", url
        time.sleep(0.3)  # let it subscribe to the event stream
        assert Browser().open(url).status == 200
        out, err = waiting.communicate(timeout=15)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, (out, err)
    assert idp.control.login_forms() == 1
    assert re.search(r"^platform\s+authorization_code\s+logged_in\s+testuser", out, re.M), out
    assert re.search(r"^ping\s+authorization_code\s+logged_in\s+testuser", out, re.M), out

    # A restart finds each provider's login in its own file.
    p.server.stop()
    restarted = start_two(start_proxy, tmp_path, idp, idp, name="restarted", state_dir=p.state_dir, port=p.port)
    assert providers_state(restarted) == {"platform": "logged_in", "ping": "logged_in"}
    assert restarted.call("/ping/x").status == 200


def test_check_config_names_the_route_that_must_pick_a_provider(idp_factory, tmp_path):
    config = {
        "providers": {"a": {"grant": "static", "accessToken": "t1"}, "b": {"grant": "static", "accessToken": "t2"}},
        "routes": [{"name": "x", "path": "/x/", "upstream": "http://127.0.0.1:9/", "credential": "access_token"},
                   {"name": "y", "path": "/y/", "upstream": "http://127.0.0.1:9/", "credential": "access_token",
                    "provider": "c"}],
    }
    result = run_cli(["check-config"], config, tmp_path)
    assert result.returncode == 1, result
    assert 'routes[0].provider: is required: several providers are configured ("a", "b")' in result.stdout, result.stdout
    assert 'routes[1].provider: names an unknown provider "c"' in result.stdout, result.stdout
    both = {"provider": {"grant": "static", "accessToken": "t"}, **config}
    result = run_cli(["check-config"], both, tmp_path)
    assert 'providers: cannot be used together with "provider"' in result.stdout, result.stdout


def test_cli_device_login_prompts_for_each_provider_in_turn(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(p.config))
    waiting = subprocess.Popen([binary_path(), "login", "--device", "--config", str(path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        for provider in ("platform", "ping"):
            assert waiting.stdout.readline().strip() == f"Signing in to {provider} (device login):"
            prompt = waiting.stdout.readline()
            code = re.search(r"enter the code (\S+)", prompt)
            assert code, prompt
            assert "(or open" in waiting.stdout.readline()
            idp.control.approve_device(code.group(1))
        out, err = waiting.communicate(timeout=20)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, (out, err)
    assert providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}
    assert re.search(r"^ping\s+authorization_code\s+logged_in", out, re.M), out

    # logout --provider ends that one only.
    result = run_cli(["logout", "--provider", "ping"], p.config, tmp_path)
    assert result.returncode == 0 and "Logged out of ping" in result.stdout, result
    assert providers_state(p) == {"platform": "logged_in", "ping": "logged_out"}


def test_static_providers_each_follow_their_own_token_file(start_proxy, main_upstream, tmp_path):
    a_file, b_file = tmp_path / "a.token", tmp_path / "b.token"
    a_file.write_text("token-a-1\n")
    b_file.write_text("token-b-1\n")
    config = {
        "listen": ["127.0.0.1:0"],
        "stateDirectory": str(tmp_path / "state"),
        "providers": {"a": {"grant": "static", "accessToken": {"file": str(a_file)}},
                      "b": {"grant": "static", "accessToken": {"file": str(b_file)}}},
        "routes": [{"name": "ra", "path": "/a/", "upstream": main_upstream.url("/a/"), "credential": "access_token",
                    "provider": "a", "headers": ["Authorization"]},
                   {"name": "rb", "path": "/b/", "upstream": main_upstream.url("/b/"), "credential": "access_token",
                    "provider": "b", "headers": ["Authorization"]}],
    }
    server = start_proxy(config)

    def sent(path):
        main_upstream.clear()
        assert server.get(path).status == 200
        record = main_upstream.wait_for(lambda records: records and records[-1])
        return record.header("Authorization")

    assert sent("/a/x") == "Bearer token-a-1"
    assert sent("/b/x") == "Bearer token-b-1"
    b_file.write_text("token-b-2\n")
    wait_until(lambda: sent("/b/x") == "Bearer token-b-2", timeout=5, what="b's new token in use")
    assert sent("/a/x") == "Bearer token-a-1"
    auth = server.get("/_platform/auth").json()
    assert set(auth["providers"]) == {"a", "b"} and auth["providers"]["b"]["grant"] == "static"


def test_cli_login_runs_the_browser_chain_then_prompts_for_a_journey_provider(start_proxy, idp_factory, tmp_path):
    import os
    import pty

    from journey_support import PASSWORD, journey_provider
    from test_journey_cli import _read_until

    idp = idp_factory(access_ttl=120)
    port = free_port()
    config = {
        "listen": [f"127.0.0.1:{port}"],
        "stateDirectory": str(tmp_path / "state"),
        "providers": {"platform": provider_for(idp, port), "am": journey_provider(idp, port)},
        "routes": [{"name": "platform-api", "path": "/api/", "upstream": idp.issuer + "/api/",
                    "credential": "access_token", "provider": "platform"},
                   {"name": "am-api", "path": "/am-api/", "upstream": idp.issuer + "/api/",
                    "credential": "access_token", "provider": "am"}],
    }
    server = start_proxy(config)
    p = CredProxy(server, port, tmp_path / "state", config)
    wait_until(lambda: server.log_events("provider_discovered"), timeout=5, what="platform discovered")
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(config))
    master, slave = pty.openpty()
    proc = subprocess.Popen([binary_path(), "login", "--config", str(path)], stdin=slave, stdout=slave, stderr=slave,
                            close_fds=True)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, b"Waiting for the login to complete", seen)
        assert f"sign in to platform:\r\n  {p.base}/_platform/login\r\n".encode() in seen, bytes(seen)
        time.sleep(0.3)  # let it subscribe to the event stream
        final = Browser().open(p.base + "/_platform/login")
        assert final.status == 200 and b"Journey logins left: am (platform-proxy login)." in final.body, final.body
        _read_until(master, b"User Name: ", seen)
        assert b"Signing in to am (journey):" in seen, bytes(seen)
        os.write(master, b"demo\n")
        _read_until(master, b"Password: ", seen)
        os.write(master, PASSWORD.encode() + b"\n")
        _read_until(master, b"LAST ERROR", seen)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = bytes(seen).decode(errors="replace")
    assert PASSWORD not in text, text
    assert providers_state(p) == {"platform": "logged_in", "am": "logged_in"}
    assert p.call("/am-api/x").status == 200 and p.call("/api/x").status == 200
    # A journey provider's login lives in its own files.
    assert (p.state_dir / "tokens-am.json").exists() and (p.state_dir / "journey-session-am.json").exists()


def test_a_held_request_waits_for_its_own_providers_login_only(start_proxy, idp_factory, tmp_path):
    import threading

    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp, extra={"gate": {"mode": "wait", "waitSeconds": 15}})
    held: dict = {}
    thread = threading.Thread(target=lambda: held.setdefault("reply", p.call("/ping/x")))
    thread.start()
    time.sleep(0.3)
    assert Browser().open(p.base + "/_platform/login?provider=platform").status == 200
    wait_until(lambda: providers_state(p)["platform"] == "logged_in", timeout=5, what="platform logged in")
    thread.join(0.5)
    assert thread.is_alive(), "platform's login released a request held for ping"
    assert Browser().open(p.base + "/_platform/login?provider=ping").status == 200
    thread.join(5)
    assert held["reply"].status == 200, held
    # Readiness names the provider that is not logged in.
    p.call("/_platform/logout?provider=platform", method="POST")
    ready = p.call("/_platform/ready")
    assert ready.status == 503 and "provider platform: not logged in" in ready.json()["reason"], ready


def test_an_upstream_401_refreshes_only_the_routes_provider(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    assert Browser().open(p.base + "/_platform/login").status == 200
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")
    ping_token = json.loads((p.state_dir / "tokens-ping.json").read_text())["access_token"]
    idp.control.expire(ping_token)
    assert p.call("/ping/x").status == 200  # 401 upstream -> ping refreshes -> one retry
    refreshes = [c["client_id"] for c in idp.control.token_call_log() if c["grant_type"] == "refresh_token"]
    assert refreshes == [PING_CLIENT], refreshes
    assert p.call("/api/x").status == 200
    assert json.loads((p.state_dir / "tokens-ping.json").read_text())["access_token"] != ping_token
