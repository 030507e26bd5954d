#!/usr/bin/env python3
"""Idle memory: what keep-alive clients that sit idle cost, and whether a burst's memory comes back.

    bench/idle_memory.py [BINARY]          (default .build/release/platform-proxy)

Starts the proxy (one loop, a mock route, access log off) on a free loopback port and prints its
RSS: at rest; with 1,000 idle keep-alive clients (each sent one request and then waits); after
they closed; right after a burst of 5,000 connections (one request each) closes; and 10 s later.

    bench/idle_memory.py --attach PID --port PORT [--path /] [--clients 1000] [--burst 5000]

Measures a server that is already running (bench/proxy.sh uses it for platform-proxy, nginx and
HAProxy): RSS summed over PID and its child processes (nginx's workers), the same steps, one
line "rest idle after_idle burst later" in kB (-1 for the burst steps when --burst 0).
Only processes this script started are stopped, by PID. Bounded: at most 5,000 sockets.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tree_pids(pid: int) -> list[int]:
    """PID and its children (read from /proc/PID/task/*/children), e.g. nginx's master and workers."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def rss_kib(pid: int) -> int:
    total = 0
    for p in tree_pids(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(sock: socket.socket, host: str, path: str) -> None:
    """One keep-alive GET; reads the whole response (Content-Length or chunked)."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the response head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length, chunked = None, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    while (len(body) < length) if length is not None else (chunked and not body.endswith(b"0\r\n\r\n")):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the response body")
        body += chunk


def settle(pid: int, seconds: float = 1.0) -> int:
    time.sleep(seconds)
    return rss_kib(pid)


def measure(pid: int, port: int, path: str, clients: int, burst: int, later_s: float) -> list[int]:
    """[rest, idle, after_idle, burst, later] in kB; the burst steps are -1 when burst is 0."""
    host = f"127.0.0.1:{port}"
    warm = socket.create_connection(("127.0.0.1", port))
    request(warm, host, path)
    warm.close()
    rest = settle(pid)
    socks = []
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port))
        request(s, host, path)
        socks.append(s)
    idle = settle(pid)
    for s in socks:
        s.close()
    socks.clear()
    after_idle = settle(pid)
    if burst <= 0:
        return [rest, idle, after_idle, -1, -1]
    for start in range(0, burst, 1000):
        batch = [socket.create_connection(("127.0.0.1", port)) for _ in range(min(1000, burst - start))]
        for s in batch:
            request(s, host, path)
        for s in batch:
            s.close()
    right_after = settle(pid, 0.5)
    later = settle(pid, later_s)
    return [rest, idle, after_idle, right_after, later]


def standalone(binary: Path, clients: int, burst: int, later_s: float) -> int:
    work = Path(tempfile.mkdtemp(prefix="idle-memory-"))
    (work / "mock").mkdir()
    (work / "mock" / "a.json").write_text(json.dumps({"a": 1}))
    port = free_port()
    config = {"listen": [f"127.0.0.1:{port}"], "workers": 1, "log": {"access": False},
              "limits": {"maxConnections": 20000, "idleTimeoutSeconds": 600},
              "routes": [{"name": "m", "path": "/", "mock": {"directory": str(work / "mock")}}]}
    (work / "c.json").write_text(json.dumps(config))
    proc = subprocess.Popen([str(binary), "serve", "--config", str(work / "c.json")],
                            stderr=open(work / "log", "wb"), stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        rest, idle, after_idle, burst_kb, later = measure(proc.pid, port, "/a", clients, burst, later_s)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    print(f"RSS at rest                          {rest / 1024:7.1f} MiB")
    print(f"with {clients} idle keep-alive clients     {idle / 1024:7.1f} MiB  (+{(idle - rest) / 1024:.1f} MiB, "
          f"{(idle - rest) * 1024 / max(clients, 1):.0f} bytes each)")
    print(f"after they closed                    {after_idle / 1024:7.1f} MiB")
    if burst > 0:
        print(f"right after a {burst}-connection burst  {burst_kb / 1024:7.1f} MiB")
        print(f"{later_s:.0f} s later                           {later / 1024:7.1f} MiB  "
              f"({(later - rest) / rest * 100:+.0f} % of rest)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=str(REPO / ".build" / "release" / "platform-proxy"))
    parser.add_argument("--attach", type=int, metavar="PID", help="measure this running server instead")
    parser.add_argument("--port", type=int, help="its loopback port (with --attach)")
    parser.add_argument("--path", default="/", help="the path each client requests (with --attach; default /)")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--burst", type=int, default=5000, help="connections in the burst (0: none)")
    parser.add_argument("--later", type=float, default=10.0, help="seconds after the burst for the last reading")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))
    args.burst = min(args.burst, 5000)
    if args.attach is None:
        return standalone(Path(args.binary), args.clients, args.burst, args.later)
    if args.port is None:
        parser.error("--attach needs --port")
    print(*measure(args.attach, args.port, args.path, args.clients, args.burst, args.later))
    return 0


if __name__ == "__main__":
    sys.exit(main())
