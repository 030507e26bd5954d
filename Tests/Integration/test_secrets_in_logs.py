"""Secrets never reach the log, end to end: one full run of the real
binary at debug level (static tokens from a file and the environment, an
apiKey, record mode, redirects that keep and strip credentials, upstream
errors, refusals of every kind, a token rotation, good and bad reloads, a
SIGTERM), then the proxy's whole stderr is searched for every secret value
used. The same run checks the log's shape: JSON lines only, and request lines
carry requestID, route, status and durationMs.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import time

import pytest

from proxy import base_config, write_mock_dir
from test_forwarding import make_tokens, q, unused_port
from upstream import Upstream

ID_TOKEN_ENV = "PLATFORM_PROXY_TEST_ID_TOKEN"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def wait_until(predicate, timeout: float = 3.0, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


@pytest.fixture
def main_upstream():
    up = Upstream("main").start()
    yield up
    up.stop()


@pytest.fixture
def foreign_upstream():
    up = Upstream("foreign").start()
    yield up
    up.stop()


class Run:
    """What one full run used and produced."""

    def __init__(self):
        self.secrets: dict[str, str] = {}
        self.proxy_bodies: list[tuple[str, bytes]] = []   # bodies the proxy made itself
        self.answered = 0                                 # requests that got a response


@pytest.fixture
def full_run(start_proxy, main_upstream, foreign_upstream, tmp_path, monkeypatch) -> tuple:
    monkeypatch.setenv("PLATFORM_PROXY_LOG_LEVEL", "debug")
    run = Run()
    tokens = make_tokens(tmp_path / "tokens")
    id_token = "idt-env-" + secrets.token_hex(20)
    monkeypatch.setenv(ID_TOKEN_ENV, id_token)
    api_key = "pk-" + secrets.token_hex(16)
    api_key_2 = "pk2-" + secrets.token_hex(16)
    run.secrets.update(access=tokens.access, id_env=id_token, api_key=api_key, api_key_after_reload=api_key_2,
                       id_file=tokens.id)
    base = main_upstream.url("/base/")
    mock_dir = write_mock_dir(tmp_path / "mock", {"a": {"mock": "a"}})
    blocker = tmp_path / "a-regular-file"
    blocker.write_text("x")
    routes = [
        {"name": "api", "path": "/api/", "upstream": base, "credential": "access_token",
         "redirects": {"follow": True, "max": 3}, "timeoutSeconds": 10},
        {"name": "jwt", "path": "/jwt/", "upstream": base, "credential": "jwt", "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": base, "credential": "none", "timeoutSeconds": 10},
        {"name": "down", "path": "/down/", "upstream": f"http://127.0.0.1:{unused_port()}/base/",
         "credential": "access_token", "timeoutSeconds": 10},
        {"name": "short", "path": "/short/", "upstream": base, "credential": "jwt", "timeoutSeconds": 1},
        {"name": "rec", "path": "/rec/", "upstream": base, "credential": "access_token", "timeoutSeconds": 10,
         "mock": {"directory": str(tmp_path / "recorded"), "mode": "record"}},
        {"name": "broken", "path": "/broken/", "upstream": base, "credential": "access_token",
         "timeoutSeconds": 10, "mock": {"directory": str(blocker / "sub"), "mode": "record"}},
        {"name": "m", "path": "/m/", "mock": {"directory": str(mock_dir)}},
    ]
    provider = {"grant": "static", "accessToken": {"file": str(tokens.access_path)},
                "idToken": {"env": ID_TOKEN_ENV}}
    cfg = base_config(None, provider=provider, routes=routes, apiKey=api_key)
    server = start_proxy(config=cfg, name="secrets")

    key = {"X-Proxy-Key": api_key}

    def get(path, headers=None, proxy_made=False, **kw):
        r = server.get(path, headers={**key, **(headers or {})}, **kw)
        run.answered += 1
        if proxy_made:
            run.proxy_bodies.append((path, r.raw_head + r.body))
        return r

    # credentialed traffic
    assert get("/api/echo").status == 200
    assert get("/jwt/echo").status == 200
    assert main_upstream.records[-1].header("Authorization") == f"Bearer {id_token}"
    assert get("/open/echo", headers={"Authorization": "Bearer app-own"}).status == 200
    assert get("/api/echo?access_token=" + tokens.access[:8] + "&page=2").status == 200
    # redirects: same host (credentials kept), foreign host (stripped), a loop (too many)
    assert get(f"/api/redirect?status=302&to={q(main_upstream.url('/base/kept'))}").status == 200
    assert get(f"/api/redirect?status=307&to={q(foreign_upstream.url('/base/stripped'))}").status == 200
    assert foreign_upstream.records[-1].header("Authorization") is None
    assert get("/api/loop", proxy_made=True).status == 502
    # upstream errors
    assert get("/down/echo", proxy_made=True).status == 502
    assert get("/short/stall?seconds=3", proxy_made=True, timeout=10).status == 504
    # record mode: a write and a write failure
    assert get("/rec/users/1").status == 200
    assert get("/broken/users/1").status == 200
    assert wait_until(lambda: server.log_events("mock_record_failed")), "no mock_record_failed"
    # mocks and control endpoints
    assert get("/m/a").status == 200
    assert get("/m/missing", proxy_made=True).status == 404
    assert get("/nowhere", proxy_made=True).status == 404
    assert get("/_platform/health", proxy_made=True).status == 200
    get("/_platform/ready", proxy_made=True)
    assert get("/_platform/metrics", proxy_made=True).status == 200
    # refusals
    assert get("/api/echo", headers={"X-Proxy-Key": "wrong-" + api_key[:6]}, proxy_made=True).status == 401
    r = server.get("/api/echo")  # no key at all
    run.answered += 1
    run.proxy_bodies.append(("no key", r.raw_head + r.body))
    assert r.status == 401
    assert get("/api/echo", headers={"Host": "evil.example"}, proxy_made=True).status == 403
    assert get("/api/echo", headers={"Origin": "http://evil.example"}, proxy_made=True).status == 403
    assert get("/api/%2e%2e/x", proxy_made=True).status == 400
    r = server.request("TRACE", "/api/echo", headers=key)
    run.answered += 1
    run.proxy_bodies.append(("TRACE", r.raw_head + r.body))
    assert r.status == 405
    ex = server.exchange(b"GET /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n"
                         b"X-Proxy-Key: " + api_key.encode() + b"\r\nAuthorization: Bearer "
                         + tokens.access.encode() + b"\r\n\r\n", timeout=3)
    assert ex.status == 400, ex.data[:300]
    run.proxy_bodies.append(("bad framing", ex.data))
    # a token rotation
    new_access = "at-rotated-" + secrets.token_hex(20)
    run.secrets["access_rotated"] = new_access
    tokens.rotate_access(new_access, atomic=True)

    def rotated():
        assert get("/api/echo").status == 200
        return main_upstream.records[-1].header("Authorization") == f"Bearer {new_access}"

    assert wait_until(rotated), "the rotated token was never used"
    # a good reload (new apiKey), then a bad one that carries secrets next to its errors
    good = json.loads(server.config_path.read_text())
    good["apiKey"] = api_key_2
    server.config_path.write_text(json.dumps(good))
    server.signal(signal.SIGHUP)
    assert wait_until(lambda: server.log_events("config_reloaded")), "no config_reloaded"
    key["X-Proxy-Key"] = api_key_2
    assert wait_until(lambda: server.get("/api/echo", headers=key).status == 200)
    run.answered += 1
    bad = json.loads(json.dumps(good))
    bad["provider"]["acessToken"] = new_access          # a typo'd key holding a secret
    bad["provider"]["tokenType"] = 7
    bad["apiKey"] = api_key_2
    bad["routes"].append({"name": "x y", "path": "nope"})
    server.config_path.write_text(json.dumps(bad))
    server.signal(signal.SIGHUP)
    assert wait_until(lambda: server.log_events("config_reload_failed")), "no config_reload_failed"
    assert get("/api/echo").status == 200
    # the end: SIGTERM, so shutdown lines are in the log too
    assert server.stop() == 0
    return server, run


def test_no_secret_value_appears_anywhere_in_the_log(full_run):
    server, run = full_run
    log = server.stderr_text()
    assert len(log.splitlines()) > 30, f"the run logged too little to mean anything:\n{log}"
    leaks = []
    for name, value in run.secrets.items():
        # the whole value, and its random part alone (in case a prefix was cut off)
        for needle in {value, value.split("-")[-1]}:
            for line_no, line in enumerate(log.splitlines(), 1):
                if needle in line:
                    leaks.append(f"{name} ({needle[:6]}…) on line {line_no}: {line[:300]}")
    assert not leaks, "secrets in the log:\n" + "\n".join(leaks)


def test_the_query_string_is_not_logged(full_run):
    server, run = full_run
    for ev in server.log_events("request"):
        assert "?" not in ev.get("path", ""), f"a request line carries the query: {ev}"
    assert "access_token=" not in server.stderr_text()


def test_proxy_made_responses_carry_no_secret(full_run):
    server, run = full_run
    leaks = []
    for what, data in run.proxy_bodies:
        for name, value in run.secrets.items():
            if value.encode() in data:
                leaks.append(f"{what}: {name}\n{data[:400]!r}")
    assert not leaks, "\n".join(leaks)


def test_log_is_json_lines_only(full_run):
    server, run = full_run
    bad = []
    for line_no, line in enumerate(server.stderr_text().splitlines(), 1):
        try:
            obj = json.loads(line)
        except ValueError as e:
            bad.append(f"line {line_no} is not JSON ({e}): {line[:200]!r}")
            continue
        if not isinstance(obj, dict):
            bad.append(f"line {line_no} is not an object: {line[:200]!r}")
            continue
        for field in ("time", "level", "event"):
            if not isinstance(obj.get(field), str) or not obj[field]:
                bad.append(f"line {line_no} lacks {field}: {line[:200]!r}")
        if isinstance(obj.get("time"), str) and not RFC3339.match(obj["time"]):
            bad.append(f"line {line_no}: time {obj['time']!r} is not RFC 3339")
        if obj.get("level") not in ("debug", "info", "warning", "error"):
            bad.append(f"line {line_no}: level {obj.get('level')!r}")
    assert not bad, "\n".join(bad[:20])


def test_request_lines_carry_request_id_route_status_and_duration(full_run):
    server, run = full_run
    lines = server.log_events("request")
    assert len(lines) >= run.answered - 1, \
        f"{len(lines)} request lines for {run.answered} answered requests (one was a framing error)"
    problems = []
    for ev in lines:
        if not (isinstance(ev.get("requestID"), str) and ev["requestID"]):
            problems.append(f"no requestID: {ev}")
        if not isinstance(ev.get("route"), str):
            problems.append(f"no route: {ev}")
        if not (isinstance(ev.get("status"), int) and 100 <= ev["status"] <= 599):
            problems.append(f"bad status: {ev}")
        if not (isinstance(ev.get("durationMs"), (int, float)) and ev["durationMs"] >= 0):
            problems.append(f"bad durationMs: {ev}")
        for field in ("method", "path"):
            if not isinstance(ev.get(field), str):
                problems.append(f"no {field}: {ev}")
    assert not problems, "\n".join(problems[:20])
    ids = [ev["requestID"] for ev in lines]
    assert len(set(ids)) == len(ids), "request IDs repeat across requests"
    by_route = {}
    for ev in lines:
        by_route.setdefault(ev["route"], set()).add(ev["status"])
    for route, status in (("api", 200), ("api", 502), ("down", 502), ("short", 504), ("m", 404), ("rec", 200)):
        assert status in by_route.get(route, set()), f"no request line for {route} {status}: {by_route}"
    slow = [ev for ev in lines if ev["route"] == "short"]
    assert slow and slow[0]["durationMs"] >= 900, f"the 504 took ~1 s, logged {slow}"
    forwarded = [ev for ev in lines if ev["route"] == "api" and ev["status"] == 200]
    assert all("upstream" in ev for ev in forwarded), f"forwarded request lines without upstream: {forwarded[:2]}"


def test_reload_lines_name_errors_but_not_secrets(full_run):
    server, run = full_run
    failed = server.log_events("config_reload_failed")
    assert failed, "no config_reload_failed"
    text = json.dumps(failed[-1])
    assert "acessToken" in text, f"the typo'd key is not named: {failed[-1]}"
    assert "tokenType" in text, f"the tokenType error is not named: {failed[-1]}"
    for value in run.secrets.values():
        assert value not in text
