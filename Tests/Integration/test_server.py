"""The HTTP/1.1 server foundation, end to end against the real binary:
control endpoint, errors, connection handling, limits, timeouts, shutdown,
check-config, and a real slowloris peer."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import time

import pytest

from proxy import (ResponseReader, base_config, build_request, is_open, require_binary, run_cli, socket_state,
                   wait_until, write_mock_dir)

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


# --------------------------------------------------------------------------- helpers


def req(server, method: str, path: str, headers: dict | None = None, body: bytes = b"",
        version: str = "HTTP/1.1") -> bytes:
    hdrs = {"Host": server.host_header}
    if body or method == "POST":
        hdrs["Content-Length"] = str(len(body))
    hdrs.update(headers or {})
    return build_request(method, path, hdrs, body, version)


def assert_error_json(resp, status: int, code: str | None = None) -> dict:
    """A proxy-made error: the status, JSON {error, message, requestID}, X-Request-ID."""
    assert resp.status == status, f"expected {status}, got:\n{resp}"
    ctype = (resp.header("content-type") or "").split(";")[0].strip()
    assert ctype == "application/json", f"error Content-Type {ctype!r}:\n{resp}"
    body = resp.json()
    assert SNAKE_CASE.match(body.get("error", "")), f"error code not snake_case: {body}"
    if code is not None:
        assert body["error"] == code, body
    assert isinstance(body.get("message"), str) and body["message"], body
    assert body.get("requestID"), body
    assert resp.header("x-request-id") == body["requestID"], \
        f"X-Request-ID {resp.header('x-request-id')!r} differs from requestID {body['requestID']!r}"
    return body




def raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def timed_health(server, timeout: float = 2.0) -> float:
    t0 = time.monotonic()
    r = server.get("/_platform/health", timeout=timeout)
    dt = time.monotonic() - t0
    assert r.status == 200, f"health during load:\n{r}"
    return dt


# --------------------------------------------------------------------------- control endpoint, errors


def test_health_answers_200_json_with_request_id(proxy):
    r = proxy.get("/_platform/health")
    assert r.status == 200, str(r)
    assert r.json() == {"status": "ok"}
    assert (r.header("content-type") or "").split(";")[0].strip() == "application/json"
    assert r.header("x-request-id"), f"no X-Request-ID:\n{r}"


def test_request_ids_differ_between_requests(proxy):
    ids = {proxy.get("/_platform/health").header("x-request-id") for _ in range(5)}
    assert len(ids) == 5, ids


def test_client_supplied_request_id_is_kept(proxy):
    r = proxy.get("/_platform/health", headers={"X-Request-ID": "it-test-4711"})
    assert r.header("x-request-id") == "it-test-4711", str(r)


def test_every_request_is_logged_as_a_json_line(proxy):
    proxy.get("/no-such-route", headers={"X-Request-ID": "log-line-check"})
    events = wait_until(lambda: proxy.log_events("request"), 3)
    assert events, f"no \"event\":\"request\" line on stderr:\n{proxy.stderr_text()[-2000:]}"
    # stderr is JSON lines only: one object per line, each with time, level and event
    for line in filter(None, proxy.stderr_text().splitlines()):
        obj = json.loads(line)
        assert {"time", "level", "event"} <= obj.keys(), line


def test_unknown_route_is_404_json_with_request_id(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "api", {"x": {"x": 1}})
    server = start_proxy(config=base_config(None, routes=[
        {"name": "api", "path": "/api/", "mock": {"directory": str(mock), "mode": "replay"}}]))
    assert server.get("/api/x").status == 200
    body = assert_error_json(server.get("/nowhere/at/all"), 404, "no_route")
    assert body["requestID"]


def test_mock_route_serves_index_and_named_files(proxy):
    r = proxy.get("/")
    assert r.status == 200 and r.json() == {"mock": "index"}, str(r)
    assert (r.header("content-type") or "").startswith("application/json")
    assert proxy.get("/a").json()["mock"] == "a"
    assert proxy.request("POST", "/c", body=b"{}").json() == {"mock": "c"}


# --------------------------------------------------------------------------- connections


def test_keep_alive_serves_two_requests_on_one_connection(proxy):
    with proxy.connect() as s:
        reader = ResponseReader(s)
        s.sendall(req(proxy, "GET", "/a"))
        first = reader.read_response()
        assert first.status == 200 and first.json()["mock"] == "a", str(first)
        assert not first.wants_close, str(first)
        time.sleep(0.1)
        assert is_open(s), "server closed a keep-alive connection after one request"
        s.sendall(req(proxy, "GET", "/b"))
        second = reader.read_response()
        assert second.status == 200 and second.json()["mock"] == "b", str(second)


def test_pipelined_requests_are_answered_in_order(proxy):
    with proxy.connect() as s:
        reader = ResponseReader(s)
        s.sendall(req(proxy, "GET", "/a") + req(proxy, "POST", "/b", body=b"hello")
                  + req(proxy, "GET", "/c"))
        got = [reader.read_response("GET"), reader.read_response("POST"), reader.read_response("GET")]
        assert [r.status for r in got] == [200, 200, 200], "\n\n".join(map(str, got))
        assert [r.json()["mock"] for r in got] == ["a", "b", "c"]


def test_http10_connection_closes_after_the_response(proxy):
    with proxy.connect() as s:
        s.sendall(req(proxy, "GET", "/_platform/health", version="HTTP/1.0"))
        reader = ResponseReader(s)
        r = reader.read_response()
        assert r.status == 200, str(r)
        assert reader.wait_for_close(2.0), "HTTP/1.0 request without keep-alive: connection left open"


def test_connection_close_is_honoured(proxy):
    with proxy.connect() as s:
        s.sendall(req(proxy, "GET", "/_platform/health", {"Connection": "close"}))
        reader = ResponseReader(s)
        r = reader.read_response()
        assert r.status == 200, str(r)
        assert r.wants_close, f"response to Connection: close lacks Connection: close:\n{r}"
        assert reader.wait_for_close(2.0), "Connection: close: server left the connection open"


def test_expect_100_continue_gets_interim_response_before_the_body(proxy):
    with proxy.connect() as s:
        reader = ResponseReader(s, timeout=3.0)
        s.sendall(req(proxy, "POST", "/a", {"Content-Length": "5", "Expect": "100-continue"}))
        interim = reader.read_interim()
        assert interim.status == 100 and interim.version == "HTTP/1.1", str(interim)
        s.sendall(b"hello")
        final = reader.read_response("POST")
        assert final.status == 200 and final.json()["mock"] == "a", str(final)


# --------------------------------------------------------------------------- limits


def test_oversized_head_gets_431_json(start_proxy):
    server = start_proxy(limits={"maxHeaderBytes": 4096})
    assert server.get("/_platform/health", headers={"X-Fill": "f" * 2000}).status == 200
    ex = server.exchange(req(server, "GET", "/_platform/health", {"X-Big": "b" * 8000}), timeout=3)
    assert ex.final is not None, f"no response to an 8 KB head (limit 4 KB): {ex.outcome}"
    assert_error_json(ex.final, 431)


def test_content_length_over_max_body_bytes_gets_413_before_the_body(start_proxy):
    server = start_proxy(limits={"maxBodyBytes": 1024})
    assert server.request("POST", "/a", body=b"x" * 1000).status == 200
    # head only: the server must refuse on the declared length, not wait for 2 KB
    ex = server.exchange(req(server, "POST", "/a", {"Content-Length": "2048"}), timeout=3)
    assert ex.final is not None, f"no response to Content-Length 2048 (limit 1024): {ex.outcome}"
    assert_error_json(ex.final, 413)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "localhost.evil.example",
                                  "127.0.0.1.nip.io"])
def test_host_not_allowed_gets_403(proxy, host):
    r = proxy.get("/_platform/metrics", headers={"Host": host})
    assert_error_json(r, 403, "host_not_allowed")


@pytest.mark.parametrize("host", ["localhost", "localhost:1", "127.0.0.1", "127.0.0.1:65000",
                                  "[::1]", "[::1]:8080"])
def test_allowed_hosts_match_the_host_part_only(proxy, host):
    r = proxy.get("/_platform/health", headers={"Host": host})
    assert r.status == 200, f"Host: {host}\n{r}"


def test_a_thousand_idle_keep_alive_connections_do_not_starve_new_clients(start_proxy):
    raise_nofile(4096)
    server = start_proxy(limits={"idleTimeoutSeconds": 60, "headerTimeoutSeconds": 30})
    socks = []
    try:
        request = req(server, "GET", "/_platform/health")
        for batch in range(10):  # batches of 100: this is about idle connections, not accept bursts
            fresh = [server.connect(timeout=10) for _ in range(100)]
            socks.extend(fresh)
            for s in fresh:
                s.sendall(request)
            for i, s in enumerate(fresh):
                r = ResponseReader(s, timeout=10).read_response()
                assert r.status == 200, f"connection {batch * 100 + i}:\n{r}"
        # all thousand now idle on keep-alive; a newcomer is still served promptly
        latencies = [timed_health(server) for _ in range(3)]
        assert max(latencies) < 1.0, f"health with 1,000 idle connections took {latencies}"
        still_open = sum(is_open(s) for s in socks)
        assert still_open == 1000, f"only {still_open} of 1,000 idle keep-alive connections still open"
    finally:
        for s in socks:
            s.close()


def test_slow_loris_connection_is_closed_after_header_timeout(start_proxy):
    server = start_proxy(limits={"headerTimeoutSeconds": 1})
    s = server.connect()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = req(server, "GET", "/_platform/health")[:-2] + b"X-Slow: " + b"a" * 200  # never ends
    latencies = []
    t0 = time.monotonic()
    closed_at = None
    received = b""
    try:
        for i, byte in enumerate(head):
            try:
                s.sendall(bytes([byte]))
            except OSError:
                closed_at = time.monotonic() - t0
                break
            state = socket_state(s)
            if state == "data":
                received += s.recv(4096)
                state = socket_state(s)
            if state == "closed":
                closed_at = time.monotonic() - t0
                break
            if i in (5, 20, 32):  # other clients are served meanwhile (t ~ 0.05, 0.2, 0.5 s)
                latencies.append(timed_health(server))
            if time.monotonic() - t0 > 3.5:
                break
            time.sleep(0.1 if i > 30 else 0.01)
    finally:
        s.close()
    print(f"slow-loris: closed after {closed_at}s, health latencies {latencies}, reply {received[:60]!r}")
    assert closed_at is not None, "a head trickling in byte by byte was not closed within 3.5 s (timeout 1 s)"
    assert closed_at <= 3.0, f"slow-loris connection closed only after {closed_at:.2f}s (header timeout 1 s)"
    if received:
        assert received.startswith(b"HTTP/1.1 408"), f"unexpected reply to a timed-out head: {received[:200]!r}"
    assert max(latencies) < 1.0, f"health latency during slow-loris: {latencies}"


def test_connection_over_max_connections_gets_503_and_close(start_proxy):
    server = start_proxy(limits={"maxConnections": 20, "idleTimeoutSeconds": 60})
    held = [server.connect() for _ in range(20)]
    try:
        for s in held:  # make sure all twenty are accepted and counted
            s.sendall(req(server, "GET", "/_platform/health"))
            assert ResponseReader(s).read_response().status == 200
        ex = server.exchange(req(server, "GET", "/_platform/health"), timeout=3, close_wait=1.0)
        assert ex.final is not None, f"21st connection: no response ({ex.outcome} after {ex.elapsed:.2f}s)"
        assert_error_json(ex.final, 503)
        assert ex.closed, "21st connection got 503 but was left open"
        # a freed slot is usable again
        held.pop().close()
        ok = wait_until(lambda: server.exchange(req(server, "GET", "/_platform/health"), timeout=2).status == 200,
                        3, 0.1)
        assert ok, "after closing one of 20 connections, a new client still gets no 200"
    finally:
        for s in held:
            s.close()


# --------------------------------------------------------------------------- shutdown


def _start_slow_post(server) -> socket.socket:
    s = server.connect()
    s.sendall(req(server, "POST", "/a", {"Content-Length": "10"}) + b"hello")
    time.sleep(0.3)
    return s


def test_sigterm_lets_an_in_flight_request_finish_and_exits_0(start_proxy):
    server = start_proxy()
    s = _start_slow_post(server)
    try:
        assert socket_state(s) == "open", "server answered before the request body was complete"
        server.signal(signal.SIGTERM)
        time.sleep(0.5)
        assert server.running, f"exited {server.proc.returncode} on SIGTERM with a request in flight"
        s.sendall(b"world")
        r = ResponseReader(s, timeout=5).read_response("POST")
        assert r.status == 200 and r.json()["mock"] == "a", str(r)
    finally:
        s.close()
    assert server.wait(10) == 0


def test_sigterm_stops_accepting_new_connections(start_proxy):
    server = start_proxy()
    s = _start_slow_post(server)  # keeps the process alive during shutdown
    try:
        server.signal(signal.SIGTERM)

        def refused():
            try:
                socket.create_connection((server.host, server.port), timeout=1).close()
                return False
            # A connection the kernel queued on a loop's listener as that listener closed is
            # reset rather than refused: not accepted either way.
            except (ConnectionRefusedError, ConnectionResetError):
                return True
        assert wait_until(refused, 2.0, 0.05), "still accepting connections 2 s after SIGTERM"
        s.sendall(b"world")
        assert ResponseReader(s, timeout=5).read_response("POST").status == 200
    finally:
        s.close()
    assert server.wait(10) == 0


def test_sigterm_closes_idle_keep_alive_connections_and_exits_promptly(proxy):
    with proxy.connect() as s:
        s.sendall(req(proxy, "GET", "/_platform/health"))
        reader = ResponseReader(s)
        assert reader.read_response().status == 200
        t0 = time.monotonic()
        proxy.signal(signal.SIGTERM)
        assert reader.wait_for_close(3.0), "idle keep-alive connection not closed on SIGTERM"
        assert proxy.wait(5) == 0
        assert time.monotonic() - t0 < 3.0


def test_sigterm_ends_an_auth_event_stream_with_its_last_chunk(start_proxy, tmp_path):
    """An open `/_platform/auth/events` stream is ended, not cut: the client reads the chunked
    body's terminating `0` chunk before the close (curl would otherwise exit 18)."""
    access = tmp_path / "access"
    access.write_text("tok-" + "A" * 20)
    server = start_proxy(base_config(None, provider={"grant": "static", "accessToken": {"file": str(access)}}))
    with server.connect() as s:
        s.sendall(req(server, "GET", "/_platform/auth/events"))
        s.settimeout(5)
        received = b""
        while b"\n\n" not in received:  # the first state event
            received += s.recv(65536)
        server.signal(signal.SIGTERM)
        while chunk := s.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower(), head
    assert b"event: state" in body
    assert body.endswith(b"\r\n0\r\n\r\n"), f"stream cut without its last chunk: {body[-40:]!r}"
    assert server.wait(5) == 0


def test_second_signal_exits_at_once(start_proxy):
    server = start_proxy()
    server.expected_exit_code = None  # a forced exit may use any code
    s = _start_slow_post(server)
    try:
        server.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert server.running, "exited before the in-flight request finished"
        t0 = time.monotonic()
        server.signal(signal.SIGTERM)
        server.wait(5)
        assert time.monotonic() - t0 < 2.0
    finally:
        s.close()


# --------------------------------------------------------------------------- check-config


def test_check_config_reports_every_mistake_with_its_path(tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"index": {}})
    config = {
        "listen": ["127.0.0.1:0"],
        "workers": "four",                                    # wrong type
        "limits": {"maxHeaderByte": 4096},                    # unknown key (typo)
        "routes": [
            {"name": "a", "path": "/a/", "mock": {"directory": str(mock), "mode": "replay"}},
            {"name": "b", "path": "/a/", "mock": {"directory": str(mock), "mode": "replay"}},  # duplicate path
            {"name": "c", "path": "/c/", "upstream": "not a url", "credential": "none"},      # bad upstream
            {"name": "d", "path": "/d/", "upstream": "https://api.example/", "credential": "access_token"},
        ],                                                    # ^ credential route, no provider
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    result = run_cli("check-config", "--config", str(path))
    output = (result.stdout + result.stderr).splitlines()
    assert result.returncode == 1, f"exit {result.returncode}; output:\n" + "\n".join(output)
    expected = {
        "unknown key": r"limits\.maxHeaderByte\b",
        "wrong type": r"workers\b",
        "duplicate route path": r"routes\[1\](\.path)?\b",
        "bad upstream URL": r"routes\[2\]\.upstream\b",
        "credential route without provider": r"(routes\[3\](\.credential)?|provider)\b",
    }
    missing = [what for what, pattern in expected.items()
               if not any(re.match(r"^\$?\.?" + pattern, line.strip()) for line in output)]
    assert not missing, f"check-config did not report {missing}; output:\n" + "\n".join(output)


def test_check_config_accepts_a_valid_config(tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"index": {}})
    path = tmp_path / "good.json"
    path.write_text(json.dumps(base_config(mock)))
    result = run_cli("check-config", "--config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok" in (result.stdout + result.stderr).lower()


def test_serve_refuses_an_invalid_config(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"listen": ["127.0.0.1:0"], "routes": [], "bogusKey": 1}))
    result = run_cli("serve", "--config", str(path), timeout=10)
    assert result.returncode != 0
    assert "bogusKey" in result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) not installed")
def test_workers_0_runs_one_loop_per_cpu_the_process_may_use(tmp_path):
    # A sidecar pinned to one CPU (taskset, --cpuset-cpus) must not start a loop per host core.
    mock = write_mock_dir(tmp_path / "mock", {"index": {}})
    path = tmp_path / "pinned.json"
    path.write_text(json.dumps({**base_config(mock), "workers": 0}))
    log_path = tmp_path / "pinned.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["taskset", "-c", "0", str(require_binary()), "serve", "--config", str(path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        started = None
        while started is None and time.monotonic() < deadline:
            for line in log_path.read_text().splitlines():
                event = json.loads(line) if line.startswith("{") else {}
                if event.get("event") == "started":
                    started = event
            time.sleep(0.05)
        assert started is not None, log_path.read_text()
        assert started["workers"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


# --------------------------------------------------------------------------- real peer: slowhttptest


@pytest.mark.skipif(shutil.which("slowhttptest") is None,
                    reason="slowhttptest not installed (Debian package slowhttptest; .ci/run installs it)")
def test_slowhttptest_slowloris_connections_are_closed_and_health_stays_up(start_proxy, tmp_path):
    server = start_proxy(limits={"headerTimeoutSeconds": 1})
    prefix = tmp_path / "slowloris"
    cmd = ["slowhttptest", "-H", "-c", "200", "-r", "100", "-i", "2", "-l", "10", "-x", "24",
           "-p", "2", "-g", "-o", str(prefix), "-u", f"http://127.0.0.1:{server.port}/_platform/health"]
    tool = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    latencies = []
    try:
        while tool.poll() is None:
            latencies.append(timed_health(server))
            time.sleep(0.5)
        output = tool.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    latencies.append(timed_health(server))
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    print(plain[-600:])
    assert tool.returncode == 0, plain[-2000:]
    rows = [line.split(",") for line in prefix.with_suffix(".csv").read_text().splitlines()[1:] if line]
    closed = max(int(r[1]) for r in rows)
    assert closed >= 150, f"slowhttptest saw only {closed} of 200 connections closed:\n" + "\n".join(map(",".join, rows))
    unavailable = [r for r in rows if r[4].strip() not in ("200", "YES")]
    assert not unavailable, f"slowhttptest probe found the service unavailable: {unavailable}"
    assert max(latencies) < 1.0, f"health latency during slowloris: {latencies}"


# --------------------------------------------------------------------------- start


def _environ(pid: int) -> dict:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [entry.split(b"=", 1) for entry in f.read().split(b"\0") if b"=" in entry]
    return {k.decode(): v.decode() for k, v in pairs}


def _cmdline(pid: int) -> list:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")[:-1]


def test_serve_starts_itself_again_with_gnutls_left_uninitialised_keeping_pid_and_arguments(start_proxy):
    # libcurl loads GnuTLS it never uses; its constructor runs before main unless
    # GNUTLS_NO_IMPLICIT_INIT is set, so serve execs itself once with it set.
    env = {k: v for k, v in os.environ.items() if k != "GNUTLS_NO_IMPLICIT_INIT"}
    server = start_proxy(env=env)
    pid = server.proc.pid
    assert _environ(pid).get("GNUTLS_NO_IMPLICIT_INIT") == "1"
    args = _cmdline(pid)
    assert args[1:] == [b"serve", b"--config", str(server.config_path).encode()], args
    assert os.path.samefile(os.readlink(f"/proc/{pid}/exe"), require_binary())
    assert server.get("/_platform/health").status == 200


def test_a_gnutls_no_implicit_init_already_set_is_left_as_it_is(start_proxy):
    server = start_proxy(env={**os.environ, "GNUTLS_NO_IMPLICIT_INIT": "0"})
    assert _environ(server.proc.pid)["GNUTLS_NO_IMPLICIT_INIT"] == "0"
    assert server.get("/_platform/health").status == 200


def test_serve_run_through_the_dynamic_loader_by_name_starts_without_restarting(tmp_path):
    """Was: `ld.so platform-proxy serve` exec'd /proc/self/exe, which names the
    loader, with the proxy's arguments: the loader tried to load "serve" and the start failed."""
    loader = next((p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1") if os.path.exists(p)), None)
    if loader is None:
        pytest.skip("no dynamic loader at a known path")
    config = base_config(routes=[])
    config_path = tmp_path / "loader.json"
    config_path.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if k != "GNUTLS_NO_IMPLICIT_INIT"}
    log = tmp_path / "loader.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([loader, str(require_binary()), "serve", "--config", str(config_path)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    try:
        assert wait_until(lambda: '"event":"listening"' in log.read_text() or proc.poll() is not None, 10)
        assert proc.poll() is None, f"exited {proc.returncode}: {log.read_text()[-400:]}"
        assert "GNUTLS_NO_IMPLICIT_INIT" not in _environ(proc.pid)  # started once, as it was
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
