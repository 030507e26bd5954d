#!/usr/bin/env python3
"""Idle memory: what keep-alive clients that sit idle cost, and whether a burst's memory comes back.

    bench/idle_memory.py [BINARY]          (default .build/release/platform-proxy)

Starts the proxy (one loop, a mock route) on a free loopback port and prints its RSS:
at rest; with 1,000 idle keep-alive clients (each sent one request and then waits);
right after a burst of 5,000 connections (one request each) closes; and 10 s later.
Only processes this script started are stopped, by PID. Bounded: at most 5,000 sockets.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IDLE_CLIENTS = 1000
BURST = 5000


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(sock: socket.socket, host: str) -> None:
    sock.sendall(f"GET /a HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed")
        data += chunk


def settle(pid: int, seconds: float = 1.0) -> int:
    time.sleep(seconds)
    return rss_kib(pid)


def main() -> int:
    binary = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / ".build" / "release" / "platform-proxy"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))
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
    host = f"127.0.0.1:{port}"
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
        warm = socket.create_connection(("127.0.0.1", port))
        request(warm, host)
        warm.close()
        rest = settle(proc.pid)
        clients = []
        for _ in range(IDLE_CLIENTS):
            s = socket.create_connection(("127.0.0.1", port))
            request(s, host)
            clients.append(s)
        idle = settle(proc.pid)
        for s in clients:
            s.close()
        clients.clear()
        after_idle = settle(proc.pid)
        for start in range(0, BURST, 1000):
            batch = [socket.create_connection(("127.0.0.1", port)) for _ in range(1000)]
            for s in batch:
                request(s, host)
            for s in batch:
                s.close()
        burst = settle(proc.pid, 0.5)
        later = settle(proc.pid, 10)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    print(f"RSS at rest                          {rest / 1024:7.1f} MiB")
    print(f"with {IDLE_CLIENTS} idle keep-alive clients     {idle / 1024:7.1f} MiB  (+{(idle - rest) / 1024:.1f} MiB, "
          f"{(idle - rest) * 1024 / IDLE_CLIENTS:.0f} bytes each)")
    print(f"after they closed                    {after_idle / 1024:7.1f} MiB")
    print(f"right after a {BURST}-connection burst  {burst / 1024:7.1f} MiB")
    print(f"10 s later                           {later / 1024:7.1f} MiB  ({(later - rest) / rest * 100:+.0f} % of rest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
