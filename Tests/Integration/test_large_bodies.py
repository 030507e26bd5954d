"""1 GiB through the proxy, both ways, in bounded memory (docs/forwarding.md:
bodies are streamed with backpressure; a 1 GiB body must pass in bounded memory).

Marked ``large_bodies``: run alone with
``python3 -m pytest -q Tests/Integration/test_large_bodies.py`` (or ``-m large_bodies``),
leave out of a quick run with ``-m "not large_bodies"``.

Bodies are the deterministic pattern of ``upstream.py``, generated and hashed
as they stream on both sides: no test process ever holds more than a few MiB of
them. While a transfer runs, the proxy's VmRSS is sampled from /proc every
100 ms; the maximum must stay under 64 MiB.
"""

from __future__ import annotations

import hashlib
import secrets
import socket
import threading
import time
import warnings

import pytest

from proxy import base_config, build_request
from upstream import Upstream, pattern_sha256, pattern_stream

with warnings.catch_warnings():  # the marker is not registered in conftest.py
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    pytestmark = pytest.mark.large_bodies

GIB = 1 << 30
RSS_LIMIT = 64 * 1024 * 1024
TRANSFER_DEADLINE = 60.0     # a hang guard, not a performance assertion
SAMPLE_EVERY = 0.1


# --------------------------------------------------------------------------- helpers


def _status_kib(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


class RSSSampler:
    """Samples a process's VmRSS every 100 ms on a thread; ``max_bytes`` is the peak seen."""

    def __init__(self, pid: int):
        self.pid = pid
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            kib = _status_kib(self.pid, "VmRSS")
            if kib is not None:
                self.samples.append(kib * 1024)
            self._stop.wait(SAMPLE_EVERY)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def max_bytes(self) -> int:
        return max(self.samples) if self.samples else 0

    def report(self) -> str:
        hwm = _status_kib(self.pid, "VmHWM")
        return (f"proxy VmRSS max {self.max_bytes / 2**20:.1f} MiB over {len(self.samples)} samples "
                f"(first {self.samples[0] / 2**20:.1f} MiB, last {self.samples[-1] / 2**20:.1f} MiB); "
                f"VmHWM {hwm / 1024 if hwm else float('nan'):.1f} MiB")


def _read_head(sock: socket.socket, deadline: float) -> tuple[int, dict[str, str], bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before the response head; got {buf[:300]!r}")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


class StreamingBody:
    """Reads a response body off a socket into a sha256, never keeping it."""

    def __init__(self, sock: socket.socket, leftover: bytes, deadline: float):
        self.sock = sock
        self.buf = bytearray(leftover)
        self.deadline = deadline
        self.sha = hashlib.sha256()
        self.length = 0

    def _more(self) -> None:
        self.sock.settimeout(max(0.1, self.deadline - time.monotonic()))
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"connection closed after {self.length} body bytes")
        self.buf += chunk

    def _take(self, n: int) -> None:
        """Hash the next ``n`` body bytes."""
        while n:
            if not self.buf:
                self._more()
            k = min(n, len(self.buf))
            self.sha.update(memoryview(self.buf)[:k])
            del self.buf[:k]
            self.length += k
            n -= k

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if len(self.buf) > 4096:
                raise ValueError(f"bad chunk framing near byte {self.length}: {bytes(self.buf[:80])!r}")
            self._more()
        i = self.buf.index(b"\r\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def read_content_length(self, n: int) -> None:
        self._take(n)

    def read_chunked(self) -> None:
        while True:
            size = int(self._line().split(b";")[0].strip(), 16)
            if size == 0:
                while self._line():
                    pass  # trailers
                return
            self._take(size)
            if self._line() != b"":
                raise ValueError(f"chunk of {size} not followed by CRLF at byte {self.length}")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def big_proxy(start_proxy, main_upstream, tmp_path):
    token = "at-" + secrets.token_hex(20)
    (tmp_path / "access").write_text(token)
    cfg = base_config(
        None,
        provider={"grant": "static", "accessToken": {"file": str(tmp_path / "access")}},
        routes=[{"name": "api", "path": "/api/", "upstream": main_upstream.url("/base/"),
                 "credential": "access_token", "timeoutSeconds": 30}],
        limits={"maxBodyBytes": 2 * GIB},
    )
    return start_proxy(config=cfg, name="big")


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("framing", ["content_length", "chunked"])
def test_1gib_upload_streams_through_in_bounded_memory(big_proxy, main_upstream, framing):
    total = GIB
    hdrs = {"Host": big_proxy.host_header, "Content-Type": "application/octet-stream", "Connection": "close"}
    if framing == "content_length":
        hdrs["Content-Length"] = str(total)
    else:
        hdrs["Transfer-Encoding"] = "chunked"
    sent_sha = hashlib.sha256()
    sock = big_proxy.connect(timeout=TRANSFER_DEADLINE)
    send_error = None
    with RSSSampler(big_proxy.pid) as rss:
        start = time.monotonic()
        deadline = start + TRANSFER_DEADLINE
        try:
            sock.sendall(build_request("POST", "/api/upload", hdrs))
            for piece in pattern_stream(total):
                sent_sha.update(piece)
                if framing == "chunked":
                    sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                else:
                    sock.sendall(piece)
                if time.monotonic() > deadline:
                    raise TimeoutError("upload not sent within the deadline")
            if framing == "chunked":
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError) as e:
            send_error = e  # the proxy answered early; read what it said
        status, headers, rest = _read_head(sock, deadline)
        body = StreamingBody(sock, rest, deadline)
        body.read_content_length(int(headers.get("content-length", "0")))
        elapsed = time.monotonic() - start
    sock.close()
    print(f"\n1 GiB upload ({framing}): {elapsed:.1f}s, {total / elapsed / 2**20:.0f} MiB/s; {rss.report()}")
    assert send_error is None, f"proxy stopped reading the upload: {send_error}; status {status}"
    assert status == 200, f"status {status} {headers}"
    rec = main_upstream.records[-1]
    assert rec.complete and rec.body_length == total, str(rec)
    assert rec.body_sha256 == sent_sha.hexdigest() == pattern_sha256(total), str(rec)
    assert rss.max_bytes < RSS_LIMIT, rss.report()


@pytest.mark.parametrize("framing", ["content_length", "chunked"])
def test_1gib_download_streams_through_in_bounded_memory(big_proxy, main_upstream, framing):
    total = GIB
    chunked = 1 if framing == "chunked" else 0
    sock = big_proxy.connect(timeout=TRANSFER_DEADLINE)
    with RSSSampler(big_proxy.pid) as rss:
        start = time.monotonic()
        deadline = start + TRANSFER_DEADLINE
        sock.sendall(build_request("GET", f"/api/download?bytes={total}&chunked={chunked}",
                                   {"Host": big_proxy.host_header, "Connection": "close"}))
        status, headers, rest = _read_head(sock, deadline)
        assert status == 200, f"status {status} {headers}"
        body = StreamingBody(sock, rest, deadline)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body.read_chunked()
        else:
            assert headers.get("content-length") == str(total), headers
            body.read_content_length(total)
        elapsed = time.monotonic() - start
    sock.close()
    print(f"\n1 GiB download ({framing} from upstream; to client: "
          f"{headers.get('transfer-encoding') or 'content-length'}): "
          f"{elapsed:.1f}s, {total / elapsed / 2**20:.0f} MiB/s; {rss.report()}")
    assert body.length == total
    assert body.sha.hexdigest() == pattern_sha256(total)
    assert rss.max_bytes < RSS_LIMIT, rss.report()
