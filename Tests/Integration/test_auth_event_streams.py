"""`/_platform/auth/events` under clients that do not keep up, through the real binary (README
"Several providers", the event stream): a stream whose client stopped reading is not queued
every change while logins change state quickly; it gets the latest state when it reads again.

    PLATFORM_PROXY_BIN=.build/debug/platform-proxy python -m pytest -q Tests/Integration/test_auth_event_streams.py
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

from credentials_support import idp_factory, launch  # noqa: F401  (fixture)
from test_credentials import unsigned_jwt

STREAMS = 20
CHURN_SECONDS = 10.0


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def demo_proxy(start_proxy, idp_factory, tmp_path):  # noqa: F811
    idp = idp_factory()
    demo_id = unsigned_jwt({"sub": "demo-sub", "exp": int(time.time()) + 600})
    return launch(start_proxy, idp, tmp_path, provider_extra={
        "demo": {"accessToken": "demo-access-" + "a" * 24, "idToken": demo_id, "expiresInSeconds": 600}})


def open_stream(port: int) -> socket.socket:
    """A stream whose receive buffer and segments are small: the proxy's socket buffer for it
    (sized by the segment size on loopback) fills within a few hundred events."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /_platform/auth/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return s


def churn(port: int, seconds: float) -> int:
    """Demo login and logout in a loop on one keep-alive connection; the number of cycles."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    cycles = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for path in ("/_platform/login/demo", "/_platform/logout"):
                conn.request("POST", path, body=b"", headers={"Content-Length": "0"})
                r = conn.getresponse()
                r.read()
                assert r.status == 200, (path, r.status)
            cycles += 1
    finally:
        conn.close()
    return cycles


def read_states(s: socket.socket, quiet: float = 1.0) -> list[dict]:
    """Everything the stream holds until it stays quiet for `quiet` seconds, as its state events."""
    s.settimeout(quiet)
    raw = b""
    while True:
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        raw += data
    states = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {") and b'"provider"' in line:
            states.append(json.loads(line[6:]))
    return states


def test_slow_event_stream_readers_keep_the_proxys_memory_bounded(start_proxy, idp_factory, tmp_path):  # noqa: F811
    p = demo_proxy(start_proxy, idp_factory, tmp_path)
    streams = [open_stream(p.port) for _ in range(STREAMS)]
    stop = threading.Event()

    def trickle():
        # Each stream takes one byte every two seconds: alive, but far behind.
        while not stop.wait(2.0):
            for s in streams:
                try:
                    s.recv(1)
                except OSError:
                    pass

    reader = threading.Thread(target=trickle, daemon=True)
    reader.start()
    try:
        churn(p.port, 1.0)  # warm up: the allocator's steady state before the baseline
        before = rss_kib(p.server.pid)
        cycles = churn(p.port, CHURN_SECONDS)
        after = rss_kib(p.server.pid)
    finally:
        stop.set()
        reader.join(5)
        for s in streams:
            s.close()
    grown = (after - before) / 1024
    assert cycles > 200, f"only {cycles} login/logout cycles: the test did not load the streams"
    assert grown < 8, f"RSS grew {grown:.1f} MiB ({before} → {after} KiB) over {cycles} cycles with {STREAMS} slow streams"
    assert p.auth()["state"] == "logged_out"


def test_an_event_stream_that_fell_behind_gets_the_latest_state_when_it_reads_again(start_proxy, idp_factory,  # noqa: F811
                                                                                      tmp_path):
    p = demo_proxy(start_proxy, idp_factory, tmp_path)
    s = open_stream(p.port)
    try:
        cycles = churn(p.port, 3.0)
        # The last change: logged in again; the stream has not read anything yet.
        conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=5)
        conn.request("POST", "/_platform/login/demo", body=b"", headers={"Content-Length": "0"})
        assert conn.getresponse().status == 200
        conn.close()
        states = read_states(s)
    finally:
        s.close()
    assert states, "the stream delivered no state event"
    assert states[-1]["state"] == "logged_in" and states[-1]["loggedIn"] is True, states[-3:]
    # Intermediate states were skipped, not all queued.
    assert len(states) < 2 * cycles, f"{len(states)} state events for {cycles} cycles: none was coalesced"
