"""`/_platform/auth/events` under clients that do not keep up, through the real binary (docs/login.md,
"Several providers", the event stream): a stream whose client stopped reading is not queued
every change while logins change state quickly; it gets the latest state when it reads again.

    PLATFORM_PROXY_BIN=.build/debug/platform-proxy python -m pytest -q Tests/Integration/test_auth_event_streams.py
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from credentials_support import free_port, idp_factory, launch  # noqa: F401  (fixture)
from test_credentials import unsigned_jwt

STREAMS = 20
# The streams are read over the proxy's Unix socket: the kernel holds a fixed ~200 KiB for each
# (a loopback TCP send buffer grows to megabytes and would hide what the proxy itself holds).
# An 8 KiB subject makes every logged_in event about that large, so a few hundred changes show
# (20 streams queueing every change hold over 150 KiB more per login and logout).
SUBJECT = "demo-" + "s" * 8192
CHURN_SECONDS = 12.0
CHURN_CYCLES = 400


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def demo(port: int, path: str = "/_platform/login/demo"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", path, body=b"", headers={"Content-Length": "0"})
        assert conn.getresponse().status == 200, path
    finally:
        conn.close()


@pytest.fixture
def short_dir():
    # sun_path is 108 bytes: pytest's tmp_path can be too long for a socket path.
    d = tempfile.mkdtemp(prefix="pp-sse-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def demo_proxy(start_proxy, idp_factory, tmp_path, short_dir):  # noqa: F811
    """A proxy with a demo login, on a TCP port and on `short_dir/proxy.sock`."""
    idp = idp_factory()
    demo_id = unsigned_jwt({"sub": SUBJECT, "exp": int(time.time()) + 600})
    port = free_port()
    return launch(start_proxy, idp, tmp_path, port=port,
                  extra={"listen": [f"127.0.0.1:{port}", f"unix:{short_dir / 'proxy.sock'}"]}, provider_extra={
                      "demo": {"accessToken": "demo-access-" + "a" * 24, "idToken": demo_id, "expiresInSeconds": 600}})


def open_stream(socket_path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(str(socket_path))
    s.sendall(b"GET /_platform/auth/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return s


def churn(port: int, seconds: float, most: int = CHURN_CYCLES) -> int:
    """Demo login and logout in a loop on one keep-alive connection, for `seconds` or `most`
    cycles; the number of cycles."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    cycles = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and cycles < most:
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


def test_slow_event_stream_readers_keep_the_proxys_memory_bounded(start_proxy, idp_factory, tmp_path,  # noqa: F811
                                                                   short_dir):
    p = demo_proxy(start_proxy, idp_factory, tmp_path, short_dir)
    streams = [open_stream(short_dir / "proxy.sock") for _ in range(STREAMS)]
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
        churn(p.port, 1.0, most=20)  # warm up: the allocator's steady state before the baseline
        before = rss_kib(p.server.pid)
        cycles = churn(p.port, CHURN_SECONDS)
        after = rss_kib(p.server.pid)
        stop.set()
        reader.join(5)
        demo(p.port)
        states = read_states(streams[0])
    finally:
        stop.set()
        reader.join(5)
        for s in streams:
            s.close()
    grown = (after - before) / 1024
    assert cycles >= 100, f"only {cycles} login/logout cycles: the test did not load the streams"
    assert grown < 8, f"RSS grew {grown:.1f} MiB ({before} → {after} KiB) over {cycles} cycles with {STREAMS} slow streams"
    # What a slow stream got: far fewer states than there were changes, the last one as it is now.
    assert states and states[-1]["state"] == "logged_in", states[-3:]
    assert len(states) < cycles, f"{len(states)} state events for {2 * cycles} changes: none was skipped"


def test_an_event_stream_that_fell_behind_gets_the_latest_state_when_it_reads_again(start_proxy, idp_factory,  # noqa: F811
                                                                                      tmp_path, short_dir):
    p = demo_proxy(start_proxy, idp_factory, tmp_path, short_dir)
    s = open_stream(short_dir / "proxy.sock")
    try:
        churn(p.port, 3.0)
        # The last change: logged in again; the stream has not read anything yet.
        demo(p.port)
        states = read_states(s)
        assert states, "the stream delivered no state event"
        assert states[-1]["state"] == "logged_in" and states[-1]["loggedIn"] is True, states[-3:]
        # Caught up, it hears the next change at once.
        demo(p.port, "/_platform/logout")
        after = read_states(s, quiet=0.5)
    finally:
        s.close()
    assert [e["state"] for e in after] == ["logged_out"], after
