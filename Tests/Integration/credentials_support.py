"""Shared plumbing for the credential-lifecycle tests (test_credentials*.py): the test IdP
(``idp.server``, Authlib) on loopback, the real proxy configured against it on a fixed port
(the redirectURI must name that port), an http.client helper, the browser login driven by
following redirects, an SSE reader for ``/_platform/auth/events`` and the secret grep.

Standard library only (plus the IdP's own dependencies, loaded in its subprocess).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import statistics
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from idp.control import IdPProcess
from proxy import ProxyProcess, write_mock_dir

SCOPES = ["openid", "profile", "email", "offline_access", "read"]
USER_SUBJECT = "testuser"  # the IdP user's pennkey claim (sub is "user-1")


# --------------------------------------------------------------------------- small HTTP client


class Reply:
    """One HTTP answer: status, headers (lower-cased names), body, elapsed seconds."""

    def __init__(self, status: int, headers: dict, body: bytes, elapsed: float):
        self.status = status
        self.headers = headers
        self.body = body
        self.elapsed = elapsed

    def json(self):
        return json.loads(self.body)

    def header(self, name: str):
        return self.headers.get(name.lower())

    def __repr__(self) -> str:
        return f"<Reply {self.status} {self.body[:300]!r}>"


def http_call(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None,
              timeout: float = 15.0) -> Reply:
    """One request on a fresh connection; redirects are NOT followed."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    hdrs = {"Connection": "close", **(headers or {})}
    if body is None and method in ("POST", "PUT", "PATCH"):
        body = b""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    start = time.monotonic()
    try:
        conn.request(method, target, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, time.monotonic() - start)
    finally:
        conn.close()


def free_port() -> int:
    """A loopback port that was free a moment ago (bound to 0, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    """Poll ``predicate()`` until truthy; returns its value or raises AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
        except OSError:  # a server not up (or not back) yet
            last = None
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value {last!r})")
        time.sleep(interval)


def percentiles(samples: list[float]) -> dict:
    s = sorted(samples)

    def pct(p):
        if not s:
            return float("nan")
        k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
        return s[k]

    return {"p50": statistics.median(s), "p99": pct(99), "max": s[-1], "min": s[0]}


# --------------------------------------------------------------------------- the proxy under test


class CredProxy:
    """The running proxy plus what the tests need about it."""

    def __init__(self, server: ProxyProcess, port: int, state_dir: Path, config: dict):
        self.server = server
        self.port = port
        self.state_dir = state_dir
        self.config = config

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tokens_path(self) -> Path:
        return self.state_dir / "tokens.json"

    def call(self, path: str, method: str = "GET", **kw) -> Reply:
        return http_call(self.base + path, method=method, **kw)

    def auth(self) -> dict:
        r = self.call("/_platform/auth")
        assert r.status == 200, r
        return r.json()

    def wait_state(self, state: str, timeout: float = 10.0, **more) -> dict:
        def check():
            a = self.auth()
            if a["state"] == state and all(a.get(k) == v for k, v in more.items()):
                return a
            return None
        return wait_until(check, timeout=timeout, what=f"auth state {state} {more or ''}")

    def stderr(self) -> str:
        return self.server.stderr_text()


def routes_for(idp: IdPProcess, mock_dir: Path | None = None, retry: bool = True) -> list[dict]:
    """api: access_token to the IdP's protected /api/ (401 for dead tokens), retryOn401;
    jwt: the id_token to the same resource (no retry); open: credential none to the discovery
    folder (200 without any token); mock: a mock route at /mock/ (never gated)."""
    routes = [
        {"name": "api", "path": "/api/", "upstream": idp.issuer + "/api/", "credential": "access_token",
         "retryOn401": retry, "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": idp.issuer + "/.well-known/", "credential": "none",
         "timeoutSeconds": 10},
    ]
    if mock_dir is not None:
        routes.append({"name": "mock", "path": "/mock/", "mock": {"directory": str(mock_dir), "mode": "replay"}})
    return routes


def provider_for(idp: IdPProcess, port: int, refresh_before: float = 2, grant: str = "authorization_code",
                 **extra) -> dict:
    provider = {
        "discoveryURL": idp.discovery_url,
        "clientID": idp.public_client_id,
        "redirectURI": f"http://127.0.0.1:{port}/_platform/callback",
        "scopes": list(SCOPES),
        "grant": grant,
        "refreshBeforeExpirySeconds": refresh_before,
        # These tests drive 401 → refresh right after a login; the storm bound has its own tests.
        "minRefreshIntervalSeconds": 0,
    }
    if grant == "client_credentials":
        provider["clientID"] = idp.confidential_client_id
        provider["clientSecret"] = idp.confidential_client_secret
        provider["scopes"] = ["read"]
        del provider["redirectURI"]
    provider.update(extra)
    return provider


def launch(start_proxy, idp: IdPProcess, workdir: Path, *, name: str = "proxy", provider: dict | None = None,
           routes: list | None = None, gate: dict | None = None, state_dir: Path | None = None,
           port: int | None = None, refresh_before: float = 2, provider_extra: dict | None = None,
           extra: dict | None = None, wait_discovery: bool = True) -> CredProxy:
    """Start the proxy on a fixed loopback port (named in redirectURI). A port grabbed by
    someone else between the probe and the bind is retried with another one."""
    state_dir = state_dir or (workdir / f"state-{name}")
    mock_dir = write_mock_dir(workdir / "mock", {"hello": {"mock": "hello"}})
    attempts = 1 if port is not None else 4
    last_error = None
    for _ in range(attempts):
        use_port = port if port is not None else free_port()
        prov = provider if provider is not None else provider_for(idp, use_port, refresh_before,
                                                                   **(provider_extra or {}))
        config = {
            "listen": [f"127.0.0.1:{use_port}"],
            "stateDirectory": str(state_dir),
            "provider": prov,
            "gate": gate or {"mode": "reject", "waitSeconds": 10},
            "routes": routes if routes is not None else routes_for(idp, mock_dir),
            **(extra or {}),
        }
        try:
            server = start_proxy(config, name=name)
        except RuntimeError as e:  # the port went to someone else
            last_error = e
            if "Address already in use" in str(e) or "EADDRINUSE" in str(e) or "in use" in str(e):
                continue
            raise
        proxy = CredProxy(server, use_port, state_dir, config)
        if wait_discovery and prov.get("discoveryURL"):
            # /_platform/login answers 404 "discovery has not completed yet" for the first
            # milliseconds after start; a browser would not be that fast
            wait_until(lambda: server.log_events("provider_discovered"), timeout=5,
                       what="provider_discovered in the proxy log")
        return proxy
    raise last_error


# --------------------------------------------------------------------------- login


class LoginTrace:
    """What the browser saw: the authorize URL's query, the callback page."""

    def __init__(self):
        self.login_reply: Reply | None = None
        self.authorize_url: str | None = None
        self.authorize_query: dict = {}
        self.idp_reply: Reply | None = None
        self.callback_url: str | None = None
        self.callback_reply: Reply | None = None


def browser_login(proxy: CredProxy) -> LoginTrace:
    """GET /_platform/login, follow the 302 to the IdP (which approves at once), follow its 302
    back to /_platform/callback: what a browser does, with redirects followed by hand."""
    t = LoginTrace()
    t.login_reply = proxy.call("/_platform/login")
    assert t.login_reply.status == 302, f"/_platform/login answered {t.login_reply}"
    t.authorize_url = t.login_reply.header("location")
    assert t.authorize_url, t.login_reply.headers
    t.authorize_query = {k: v[0] for k, v in parse_qs(urlsplit(t.authorize_url).query).items()}
    t.idp_reply = http_call(t.authorize_url)
    assert t.idp_reply.status == 302, f"IdP authorize answered {t.idp_reply}"
    t.callback_url = t.idp_reply.header("location")
    assert t.callback_url and t.callback_url.startswith(proxy.base + "/_platform/callback"), t.callback_url
    t.callback_reply = http_call(t.callback_url)
    return t


def login(proxy: CredProxy) -> dict:
    """A complete browser login; returns /_platform/auth once logged in."""
    t = browser_login(proxy)
    assert t.callback_reply.status == 200, f"callback answered {t.callback_reply}"
    return proxy.wait_state("logged_in", timeout=5)


# --------------------------------------------------------------------------- SSE


class EventStream:
    """Reads ``/_platform/auth/events`` on a background thread; ``events`` are the decoded
    ``state`` payloads in arrival order."""

    def __init__(self, proxy: CredProxy):
        self.proxy = proxy
        self.events: list[dict] = []
        self.raw = b""
        self.head = b""
        self.error: str | None = None
        self._cond = threading.Condition()
        self._sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        self._sock.sendall(f"GET /_platform/auth/events HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
                           "Accept: text/event-stream\r\n\r\n".encode())
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        buf = b""
        chunked = None
        body = b""
        try:
            self._sock.settimeout(None)
            while True:
                data = self._sock.recv(65536)
                if not data:
                    break
                buf += data
                if chunked is None:
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    self.head = buf[:end]
                    chunked = b"chunked" in self.head.lower()
                    buf = buf[end + 4:]
                if chunked:
                    while True:
                        line_end = buf.find(b"\r\n")
                        if line_end < 0:
                            break
                        size = int(buf[:line_end].split(b";")[0], 16)
                        if len(buf) < line_end + 2 + size + 2:
                            break
                        body += buf[line_end + 2:line_end + 2 + size]
                        buf = buf[line_end + 2 + size + 2:]
                else:
                    body += buf
                    buf = b""
                while b"\n\n" in body:
                    block, body = body.split(b"\n\n", 1)
                    self._block(block)
        except OSError as e:
            if not self._closed:
                self.error = str(e)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _block(self, block: bytes):
        self.raw += block + b"\n\n"
        name, data = None, []
        for line in block.decode().split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if name == "state" and data:
            with self._cond:
                self.events.append(json.loads("\n".join(data)))
                self._cond.notify_all()

    def states(self) -> list[str]:
        with self._cond:
            return [e["state"] for e in self.events]

    def wait_for(self, predicate, timeout: float = 10.0, what: str = "event"):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self.events):
                    return list(self.events)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"SSE: timed out waiting for {what}; states so far {self.states_unlocked()} "
                                         f"error={self.error}")
                self._cond.wait(remaining)

    def states_unlocked(self):
        return [e["state"] for e in self.events]

    def wait_state(self, state: str, timeout: float = 10.0, after: int = 0):
        return self.wait_for(lambda ev: any(e["state"] == state for e in ev[after:]), timeout,
                             f"state {state} after event #{after}")

    def close(self):
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


# --------------------------------------------------------------------------- tokens.json


def file_mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def stored_tokens(proxy: CredProxy, predicate=None, timeout: float = 3.0) -> dict:
    """tokens.json once it exists (written by a worker thread just after the state changes)
    and, if given, satisfies ``predicate``."""
    def read():
        try:
            data = json.loads(proxy.tokens_path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return data if predicate is None or predicate(data) else None
    return wait_until(read, timeout=timeout, what=f"{proxy.tokens_path} written")


# --------------------------------------------------------------------------- the secret grep


def assert_no_secrets_logged(idp: IdPProcess, proxies, extra: list[str] = ()):
    """Every token, code and client secret the IdP issued (plus ``extra``, e.g. demo tokens)
    must be absent from every proxy's stderr log."""
    values = [v for v in idp.control.secrets() if v] + [v for v in extra if v]
    assert values, "the IdP reports no secrets at all: the grep would prove nothing"
    leaks = []
    for p in proxies:
        server = p.server if isinstance(p, CredProxy) else p
        text = server.stderr_text()
        for v in values:
            if len(v) >= 8 and v in text:
                line = next(l for l in text.splitlines() if v in l)
                leaks.append(f"{server.log_path}: secret {v[:6]}… appears in: {line[:300]}")
    assert not leaks, "secrets in the proxy log:\n" + "\n".join(leaks)


@pytest.fixture
def idp_factory(tmp_path):
    """``idp_factory(**flags) -> IdPProcess`` (stopped at teardown)."""
    started = []

    def _start(**flags):
        p = IdPProcess(log_path=tmp_path / f"idp-{len(started)}.log", **flags)
        p.start()
        started.append(p)
        return p

    yield _start
    for p in started:
        p.stop()


@pytest.fixture(autouse=True)
def proxy_debug_logs(monkeypatch):
    """Every proxy runs at debug level: the most log lines a secret could slip into."""
    monkeypatch.setenv("PLATFORM_PROXY_LOG_LEVEL", "debug")
