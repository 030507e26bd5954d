"""A recording HTTP/1.1 test upstream for the forwarding tests.

Standard library only. ``Upstream(name).start()`` listens on an ephemeral
127.0.0.1 port, one thread per connection, keep-alive by default (every
response is framed by Content-Length or chunked, so connections are reused and
can be counted). Every request is recorded as a ``Record``: method, target,
headers in order with duplicates, body length and sha256 (bodies are hashed as
they stream in, never kept), and the connection it came on.

Behaviour is chosen by the last segment of the path, so it works under any
route prefix (``/base/redirect?...``):

- ``redirect?to=URL&status=302``   answers ``status`` with ``Location: URL``
- ``loop?status=302``              redirects to its own absolute URL, forever
- ``chain?n=K``                    redirects to ``chain?n=K-1`` (absolute URL); at 0, echo
- ``stall?seconds=N``              sleeps N seconds, then echoes
- ``download?bytes=N&chunked=0|1`` streams N bytes of ``pattern_stream`` (Content-Length, or chunked)
- ``upload``                       the body's length and sha256 (like echo)
- ``status?code=N``                that status; 204/304 without a body
- ``cookies``                      two Set-Cookie and two X-Multi response fields
- ``truncate?bytes=N&send=M``      Content-Length N, only M bytes, then the connection closes
- anything else                    echo: JSON of what arrived

Any request with ``pause_before_body=S`` in its query waits S seconds before
reading its body (backpressure on the sender).

``python3 upstream.py [PORT]`` runs one standalone for manual poking.
"""

from __future__ import annotations

import functools
import hashlib
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

# --------------------------------------------------------------------------- body pattern

PATTERN_UNIT = 1 << 20          # pattern_stream yields pieces of this size (the last may be shorter)
_STAMP_EVERY = 1 << 16          # an 8-byte big-endian block number every 64 KiB
_PERIOD = 251                   # prime, so the base pattern never lines up with the stamps
_BASE = bytes((i * 131 + 7) % 256 for i in range(_PERIOD))
_TABLE = _BASE * (PATTERN_UNIT // _PERIOD + 2)


def pattern_piece(offset: int, n: int) -> bytes:
    """Bytes [offset, offset+n) of the pattern; ``offset`` must be a multiple of 64 KiB."""
    assert offset % _STAMP_EVERY == 0
    start = offset % _PERIOD
    piece = bytearray(_TABLE[start:start + n])
    for pos in range(0, n, _STAMP_EVERY):
        stamp = ((offset + pos) // _STAMP_EVERY).to_bytes(8, "big")
        end = min(8, n - pos)
        piece[pos:pos + end] = stamp[:end]
    return bytes(piece)


def pattern_stream(total: int, unit: int = PATTERN_UNIT):
    """The deterministic test body of ``total`` bytes, in pieces of ``unit`` (a multiple of 64 KiB)."""
    assert unit % _STAMP_EVERY == 0 and unit <= PATTERN_UNIT
    offset = 0
    while offset < total:
        n = min(unit, total - offset)
        yield pattern_piece(offset, n)
        offset += n


@functools.lru_cache(maxsize=16)
def pattern_sha256(total: int) -> str:
    h = hashlib.sha256()
    for piece in pattern_stream(total):
        h.update(piece)
    return h.hexdigest()


# --------------------------------------------------------------------------- records


@dataclass
class Record:
    """One request as the upstream saw it."""

    upstream: str
    connection: int                      # this upstream's connection counter (1, 2, ...)
    peer_port: int                       # the proxy's source port for that connection
    method: str
    target: str                          # path and query, as sent
    version: str
    headers: list[tuple[str, str]]       # in order, duplicates kept
    body_length: int = 0
    body_sha256: str = hashlib.sha256(b"").hexdigest()
    chunked: bool = False                # the body arrived chunked
    complete: bool = False               # the whole body arrived
    received_at: float = field(default_factory=time.monotonic)

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def header_names(self) -> list[str]:
        return [k.lower() for k, _ in self.headers]

    def to_json(self) -> dict:
        return {
            "upstream": self.upstream, "connection": self.connection, "peerPort": self.peer_port,
            "method": self.method, "target": self.target, "version": self.version,
            "headers": [[k, v] for k, v in self.headers],
            "bodyLength": self.body_length, "bodySha256": self.body_sha256,
            "chunked": self.chunked, "complete": self.complete,
        }

    def __str__(self) -> str:
        head = f"{self.method} {self.target} {self.version} (conn {self.connection})\n"
        head += "".join(f"  {k}: {v}\n" for k, v in self.headers)
        return head + f"  [body {self.body_length} bytes sha256={self.body_sha256[:16]}… complete={self.complete}]"


class BadRequest(Exception):
    pass


class ClientGone(Exception):
    pass


# --------------------------------------------------------------------------- server


MAX_HEAD = 64 * 1024
READ_UNIT = 1 << 20
IDLE_TIMEOUT = 120.0


class Upstream:
    """A recording keep-alive HTTP/1.1 server on 127.0.0.1:<ephemeral>."""

    def __init__(self, name: str = "upstream", host: str = "127.0.0.1"):
        self.name = name
        self.host = host
        self.port = 0
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._conn_count = 0
        self._open: dict[int, socket.socket] = {}
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self.errors: list[str] = []       # unexpected server-side exceptions, for diagnosis

    # -- lifecycle

    def start(self) -> "Upstream":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(512)
        self.port = sock.getsockname()[1]
        self._listener = sock
        t = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stopping = True
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            conns = list(self._open.values())
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=2)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- addresses

    @property
    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    # -- what was recorded

    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def connections(self) -> set[int]:
        """Distinct TCP connections that carried at least one recorded request."""
        return {r.connection for r in self.records}

    @property
    def connections_accepted(self) -> int:
        with self._lock:
            return self._conn_count

    def wait_for(self, predicate, timeout: float = 3.0, interval: float = 0.01):
        """Poll until ``predicate(records)`` is truthy; returns its last value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self.records)
            if value or time.monotonic() >= deadline:
                return value
            time.sleep(interval)

    def dump(self) -> str:
        return "\n".join(str(r) for r in self.records) or "(no requests recorded)"

    # -- connection handling

    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                conn, peer = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conn_count += 1
                cid = self._conn_count
                self._open[cid] = conn
            t = threading.Thread(target=self._serve, args=(conn, cid, peer[1]),
                                 name=f"{self.name}-conn{cid}", daemon=True)
            t.start()

    def _serve(self, conn: socket.socket, cid: int, peer_port: int) -> None:
        conn.settimeout(IDLE_TIMEOUT)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = conn.makefile("rb", buffering=READ_UNIT)
        try:
            while not self._stopping:
                keep = self._one_request(conn, rfile, cid, peer_port)
                if not keep:
                    break
        except (ClientGone, ConnectionError, socket.timeout, OSError, ValueError):
            pass
        except Exception as e:  # a bug in the test server: keep it visible
            self.errors.append(f"conn {cid}: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._open.pop(cid, None)
            try:
                rfile.close()
                conn.close()
            except OSError:
                pass

    def _read_head(self, rfile) -> list[bytes] | None:
        lines: list[bytes] = []
        total = 0
        while True:
            line = rfile.readline(MAX_HEAD)
            if not line:
                if lines:
                    raise ClientGone
                return None  # clean close between requests
            total += len(line)
            if total > MAX_HEAD:
                raise BadRequest("head too large")
            if line in (b"\r\n", b"\n"):
                if not lines:
                    continue  # tolerate leading empty lines
                return lines
            lines.append(line.rstrip(b"\r\n"))

    def _one_request(self, conn: socket.socket, rfile, cid: int, peer_port: int) -> bool:
        lines = self._read_head(rfile)
        if lines is None:
            return False
        try:
            method, target, version = lines[0].decode("latin-1").split(" ")
        except ValueError:
            self._send(conn, 400, [], b"bad request line\n", close=True)
            return False
        headers = []
        for raw in lines[1:]:
            name, sep, value = raw.partition(b":")
            if not sep:
                self._send(conn, 400, [], b"bad header line\n", close=True)
                return False
            headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
        rec = Record(self.name, cid, peer_port, method, target, version, headers)
        with self._lock:
            self._records.append(rec)

        pause = parse_qs(urlsplit(target).query).get("pause_before_body")
        if pause:  # let the sender's buffers fill up before reading anything
            time.sleep(float(pause[-1]))
        te = (rec.header("transfer-encoding") or "").lower()
        cl = rec.header("content-length")
        has_body = "chunked" in te or (cl is not None and int(cl) > 0)
        if has_body and (rec.header("expect") or "").lower() == "100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        h = hashlib.sha256()
        length = 0
        if "chunked" in te:
            rec.chunked = True
            while True:
                size_line = rfile.readline(1024)
                if not size_line:
                    raise ClientGone
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers
                        t = rfile.readline(MAX_HEAD)
                        if not t:
                            raise ClientGone
                        if t in (b"\r\n", b"\n"):
                            break
                    break
                remaining = size
                while remaining:
                    data = rfile.read(min(remaining, READ_UNIT))
                    if not data:
                        raise ClientGone
                    h.update(data)
                    length += len(data)
                    remaining -= len(data)
                    rec.body_length = length
                if rfile.readline(16) not in (b"\r\n", b"\n"):
                    raise BadRequest("chunk not followed by CRLF")
        elif cl is not None:
            remaining = int(cl)
            while remaining:
                data = rfile.read(min(remaining, READ_UNIT))
                if not data:
                    raise ClientGone
                h.update(data)
                length += len(data)
                remaining -= len(data)
                rec.body_length = length
        rec.body_length = length
        rec.body_sha256 = h.hexdigest()
        rec.complete = True

        conn_hdr = [t.strip().lower() for t in (rec.header("connection") or "").split(",")]
        close = "close" in conn_hdr or (version == "HTTP/1.0" and "keep-alive" not in conn_hdr)
        self._respond(conn, rec, close)
        return not close

    # -- behaviours

    def _respond(self, conn: socket.socket, rec: Record, close: bool) -> None:
        parts = urlsplit(rec.target)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        behaviour = parts.path.rstrip("/").rsplit("/", 1)[-1]
        head_only = rec.method == "HEAD"
        extra = [("X-Upstream", self.name), ("X-Upstream-Connection", str(rec.connection))]

        if behaviour == "redirect":
            status = int(query.get("status", "302"))
            body = json.dumps({"redirectTo": query.get("to", "")}).encode()
            self._send(conn, status, extra + [("Location", query.get("to", "/")),
                                              ("Content-Type", "application/json")],
                       body, close=close, head_only=head_only)
        elif behaviour == "loop":
            status = int(query.get("status", "302"))
            self._send(conn, status, extra + [("Location", self.url(rec.target))], b"loop\n",
                       close=close, head_only=head_only)
        elif behaviour == "chain" and int(query.get("n", "0")) > 0:
            n = int(query["n"])
            status = int(query.get("status", "302"))
            location = self.url(f"{parts.path}?n={n - 1}")
            self._send(conn, status, extra + [("Location", location)], f"chain {n}\n".encode(),
                       close=close, head_only=head_only)
        elif behaviour == "cookies":
            hdrs = extra + [("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/; HttpOnly"),
                            ("X-Multi", "one"), ("X-Multi", "two"), ("Content-Type", "text/plain")]
            self._send(conn, 200, hdrs, b"cookies\n", close=close, head_only=head_only)
        elif behaviour == "truncate":
            # promise `bytes`, send only `send` of them, then close: a broken upstream response
            total, sent = int(query.get("bytes", "100000")), int(query.get("send", "1000"))
            conn.sendall(self._head(200, extra + [("Content-Length", str(total))]))
            conn.sendall(pattern_piece(0, sent))
            time.sleep(0.05)
            raise ClientGone
        elif behaviour == "download":
            self._download(conn, rec, query, extra, close, head_only)
        elif behaviour == "status":
            code = int(query.get("code", "200"))
            hdrs = extra + [("Content-Type", "application/json")]
            if code == 304:
                hdrs.append(("ETag", '"v1"'))
            body = b"" if code in (204, 304) else json.dumps({"status": code}).encode()
            self._send(conn, code, hdrs, body, close=close, head_only=head_only)
        else:
            if behaviour == "stall":
                time.sleep(float(query.get("seconds", "5")))
            self._send(conn, 200, extra + [("Content-Type", "application/json")],
                       json.dumps(self._echo(rec)).encode(), close=close, head_only=head_only)

    def _echo(self, rec: Record) -> dict:
        out = rec.to_json()
        out["length"] = rec.body_length
        out["sha256"] = rec.body_sha256
        return out

    def _download(self, conn, rec, query, extra, close, head_only) -> None:
        total = int(query.get("bytes", "0"))
        chunked = query.get("chunked", "0") not in ("0", "", "false")
        hdrs = extra + [("Content-Type", "application/octet-stream")]
        if chunked:
            hdrs.append(("Transfer-Encoding", "chunked"))
        else:
            hdrs.append(("Content-Length", str(total)))
        if close:
            hdrs.append(("Connection", "close"))
        conn.sendall(self._head(200, hdrs))
        if head_only:
            return
        for piece in pattern_stream(total):
            if chunked:
                conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                conn.sendall(piece)
        if chunked:
            conn.sendall(b"0\r\n\r\n")

    # -- writing

    @staticmethod
    def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
        reason = {200: "OK", 204: "No Content", 301: "Moved Permanently", 302: "Found", 303: "See Other",
                  304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
                  400: "Bad Request"}.get(status, "Status")
        return (f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
                + "\r\n").encode("latin-1")

    def _send(self, conn, status: int, headers: list[tuple[str, str]], body: bytes,
              close: bool = False, head_only: bool = False) -> None:
        hdrs = list(headers)
        if status not in (204, 304) and not (100 <= status < 200):
            hdrs.append(("Content-Length", str(len(body))))
        else:
            body = b""
        if close:
            hdrs.append(("Connection", "close"))
        conn.sendall(self._head(status, hdrs) + (b"" if head_only else body))


if __name__ == "__main__":
    up = Upstream("standalone")
    up.host = "127.0.0.1"
    if len(sys.argv) > 1:
        # bind to a fixed port for manual use
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(sys.argv[1])))
        sock.listen(512)
        up._listener, up.port = sock, int(sys.argv[1])
        threading.Thread(target=up._accept_loop, daemon=True).start()
    else:
        up.start()
    print(f"listening on {up.url()}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        up.stop()
