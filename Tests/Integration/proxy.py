"""Start the real platform-proxy binary and talk raw HTTP/1.1 to it.

Standard library only. The pieces:

- ``ProxyProcess``: writes a config, runs ``platform-proxy serve``, learns the
  ephemeral port from the ``"event":"listening"`` log line, stops with SIGTERM.
- ``exchange``: one fresh TCP connection, send bytes, read what comes back,
  and say how the conversation ended (response, close, reset or timeout).
- ``ResponseReader``: parses responses off a socket one at a time, keeping
  leftover bytes, so keep-alive and pipelining can be checked on one socket.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

INTEGRATION_DIR = Path(__file__).resolve().parent
REPO_ROOT = INTEGRATION_DIR.parent.parent
VECTORS_DIR = INTEGRATION_DIR / "vectors"

LISTEN_WAIT_SECONDS = 10.0
STOP_WAIT_SECONDS = 15.0


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    """Polls ``predicate`` until it returns something truthy (returned) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


class RawUpstream:
    """Base of the hostile and faulty upstreams the tests write by hand: a loopback listener
    (`port`, `url`) that serves each connection on a thread of its own with `_serve(conn)`,
    until `close`."""

    def __init__(self, backlog: int = 64):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        raise NotImplementedError

    def close(self):
        self.sock.close()


def read_head(conn: socket.socket) -> tuple[bytes, bytes] | None:
    """Reads one request head off a raw connection: (head, body bytes read with it), or None
    when the peer closed first. For the hostile and faulty upstreams the tests write by hand."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def binary_path() -> Path:
    """The binary under test: $PLATFORM_PROXY_BIN, else the debug build."""
    env = os.environ.get("PLATFORM_PROXY_BIN")
    return Path(env) if env else REPO_ROOT / ".build" / "debug" / "platform-proxy"


def require_binary() -> Path:
    path = binary_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RuntimeError(
            f"platform-proxy binary not found at {path}. Run `swift build` in {REPO_ROOT} "
            "(or `make test`, which builds first), or point PLATFORM_PROXY_BIN at a built binary."
        )
    return path


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run a one-shot subcommand (check-config, --version, ...) and capture its output."""
    return subprocess.run(
        [str(require_binary()), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- process


TUNING_SWITCH = "PLATFORM_PROXY_CURL_TUNING"


def keeping_tuning_switch(env: dict | None) -> dict | None:
    """An environment of a test's own keeps the tests' PLATFORM_PROXY_CURL_TUNING (`make
    integration-untuned` runs every test with it off) unless it names its own."""
    if env is None or TUNING_SWITCH in env or TUNING_SWITCH not in os.environ:
        return env
    return {**env, TUNING_SWITCH: os.environ[TUNING_SWITCH]}


class ProxyProcess:
    """One running ``platform-proxy serve`` with its own config and stderr log."""

    def __init__(self, config: dict, workdir: Path, name: str = "proxy", env: dict | None = None):
        self.config = config
        self.env = keeping_tuning_switch(env)  # the process environment; None inherits the tests'

        self.workdir = Path(workdir)
        self.name = name
        self.config_path = self.workdir / f"{name}.json"
        self.log_path = self.workdir / f"{name}.stderr.log"
        self.proc: subprocess.Popen | None = None
        self.addresses: list[str] = []
        self.exit_code: int | None = None
        self.signals_sent: list[int] = []  # to tell our signals from someone else's

    # -- lifecycle

    def start(self) -> "ProxyProcess":
        binary = require_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=2))
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [str(binary), "serve", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.workdir,
                env=self.env,
            )
        finally:
            log.close()
        self._wait_for_listening()
        return self

    def _wait_for_listening(self) -> None:
        expected = max(1, len(self.config.get("listen", [])))
        deadline = time.monotonic() + LISTEN_WAIT_SECONDS
        while time.monotonic() < deadline:
            self.addresses = [e["address"] for e in self.log_events("listening") if "address" in e]
            if len(self.addresses) >= expected:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"platform-proxy exited with {self.proc.returncode} before listening; "
                    f"stderr ({self.log_path}):\n{self.stderr_text()[-4000:]}"
                )
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(
            f"no 'listening' log line within {LISTEN_WAIT_SECONDS:.0f}s; "
            f"stderr ({self.log_path}):\n{self.stderr_text()[-4000:]}"
        )

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.signals_sent.append(signum)
        self.proc.send_signal(signum)

    def wait(self, timeout: float = STOP_WAIT_SECONDS) -> int:
        self.exit_code = self.proc.wait(timeout=timeout)
        return self.exit_code

    def stop(self, timeout: float = STOP_WAIT_SECONDS) -> int:
        """SIGTERM and wait; returns the exit code (kills and raises on a hang)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(
                    f"platform-proxy did not exit within {timeout:.0f}s of SIGTERM; log: {self.log_path}"
                )
        self.exit_code = self.proc.returncode
        return self.exit_code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def foreign_signals(self) -> list:
        """Shutdown log lines for signals this harness did not send (someone killed it by name?)."""
        shutdowns = self.log_events("shutting_down")
        return shutdowns[len(self.signals_sent):] if len(shutdowns) > len(self.signals_sent) else []

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- addresses

    @property
    def address(self) -> str:
        return self.addresses[0]

    @property
    def host(self) -> str:
        host, _, _ = self.address.rpartition(":")
        return host.strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def host_header(self) -> str:
        return self.address

    # -- logs

    def stderr_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_events(self, event: str | None = None) -> list[dict]:
        """Every JSON log line (optionally only those with this "event")."""
        out = []
        for line in self.stderr_text().splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if event is None or obj.get("event") == event:
                out.append(obj)
        return out

    # -- talking to it

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def raw(self, data: bytes, timeout: float = 2.0) -> bytes:
        """Fresh connection, send ``data``, read until close or ``timeout``; what came back."""
        return exchange((self.host, self.port), data, timeout=timeout, stop_after_response=False).data

    def exchange(self, data: bytes, timeout: float = 2.0, **kw) -> "Exchange":
        return exchange((self.host, self.port), data, timeout=timeout, **kw)

    def request(self, method: str, path: str, headers: dict | None = None, body: bytes = b"",
                timeout: float = 5.0) -> "Response":
        """One request on a fresh connection (``Connection: close``), parsed."""
        hdrs = {"Host": self.host_header, "Connection": "close"}
        if body or method in ("POST", "PUT", "PATCH"):
            hdrs["Content-Length"] = str(len(body))
        hdrs.update(headers or {})
        with self.connect(timeout) as sock:
            sock.sendall(build_request(method, path, hdrs, body))
            return ResponseReader(sock, timeout=timeout).read_response(method=method)

    def get(self, path: str, **kw) -> "Response":
        return self.request("GET", path, **kw)


# --------------------------------------------------------------------------- requests


def build_request(method: str, path: str, headers: dict, body: bytes = b"", version: str = "HTTP/1.1") -> bytes:
    head = f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + body


# --------------------------------------------------------------------------- responses


@dataclass
class Response:
    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    raw_head: bytes = b""
    interim: list[int] = field(default_factory=list)  # 1xx statuses seen before this one

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body)

    @property
    def wants_close(self) -> bool:
        conn = (self.header("connection") or "").lower()
        return "close" in [t.strip() for t in conn.split(",")]

    def __str__(self) -> str:
        return (self.raw_head + self.body[:300]).decode("latin-1")


class IncompleteResponse(Exception):
    """The buffer does not hold a whole response yet."""


class MalformedResponse(Exception):
    pass


_STATUS_RE = re.compile(rb"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$")


def parse_response(buf: bytes, method: str = "GET", eof: bool = False) -> tuple[Response, int]:
    """Parse one response from the front of ``buf``; returns it and the bytes consumed.

    Raises IncompleteResponse if more bytes are needed (``eof`` says none will
    come, which completes a close-delimited body).
    """
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        raise IncompleteResponse
    head = buf[:end]
    lines = head.split(b"\r\n")
    m = _STATUS_RE.match(lines[0])
    if not m:
        raise MalformedResponse(f"bad status line {lines[0][:200]!r}")
    version, status, reason = m.group(1).decode(), int(m.group(2)), (m.group(3) or b"").decode("latin-1")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise MalformedResponse(f"bad header line {line[:200]!r}")
        headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
    pos = end + 4
    resp = Response(version, status, reason, headers, b"", raw_head=buf[:pos])
    no_body = 100 <= status < 200 or status in (204, 304) or method == "HEAD"
    if no_body:
        return resp, pos
    te = (resp.header("transfer-encoding") or "").lower()
    cl = resp.header("content-length")
    if "chunked" in te:
        body = bytearray()
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                raise IncompleteResponse
            size = int(buf[pos:line_end].split(b";")[0].strip(), 16)
            pos = line_end + 2
            if size == 0:
                trailer_end = buf.find(b"\r\n\r\n", pos - 2)
                if trailer_end < 0:
                    raise IncompleteResponse
                pos = trailer_end + 4
                break
            if len(buf) < pos + size + 2:
                raise IncompleteResponse
            body += buf[pos:pos + size]
            pos += size + 2
        resp.body = bytes(body)
        return resp, pos
    if cl is not None:
        n = int(cl)
        if len(buf) < pos + n:
            raise IncompleteResponse
        resp.body = buf[pos:pos + n]
        return resp, pos + n
    if not eof:
        raise IncompleteResponse
    resp.body = buf[pos:]
    return resp, len(buf)


class ResponseReader:
    """Reads successive responses from one socket (keep-alive, pipelining)."""

    def __init__(self, sock: socket.socket, timeout: float = 5.0):
        self.sock = sock
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete response within the timeout")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no complete response within the timeout") from None
        if not chunk:
            self.eof = True
        self.buf += chunk

    def read_response(self, method: str = "GET", skip_interim: bool = True) -> Response:
        deadline = time.monotonic() + self.timeout
        interim = []
        while True:
            try:
                resp, used = parse_response(self.buf, method, eof=self.eof)
            except IncompleteResponse:
                if self.eof:
                    raise ConnectionError(f"connection closed mid-response; got {self.buf[:300]!r}")
                self._fill(deadline)
                continue
            self.buf = self.buf[used:]
            if skip_interim and 100 <= resp.status < 200 and resp.status != 101:
                interim.append(resp.status)
                continue
            resp.interim = interim
            return resp

    def read_interim(self) -> Response:
        return self.read_response(skip_interim=False)

    def wait_for_close(self, timeout: float) -> bool:
        """True if the peer closes (EOF or reset) within ``timeout``; extra bytes are kept."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._fill(deadline)
            except TimeoutError:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
        return True


def socket_state(sock: socket.socket) -> str:
    """'open', 'data' (bytes waiting) or 'closed' (EOF/RST), without blocking."""
    saved = sock.gettimeout()
    sock.settimeout(0.0)  # with a timeout set, Python would wait out EAGAIN
    try:
        data = sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return "open"
    except OSError:
        return "closed"
    finally:
        sock.settimeout(saved)
    return "data" if data else "closed"


def is_open(sock: socket.socket) -> bool:
    """False if the peer has closed (EOF/RST) the connection; does not block."""
    return socket_state(sock) != "closed"


# --------------------------------------------------------------------------- raw exchange


@dataclass
class Exchange:
    """What happened on one raw connection."""

    data: bytes                      # every byte the server sent
    outcome: str                     # "response" | "close" | "reset" | "timeout"
    elapsed: float                   # seconds from send to the end of reading
    first_byte_after: float | None   # seconds from send to the first response byte
    closed: bool                     # the server closed (EOF or RST) within the window
    closed_after: float | None       # seconds from send to that close
    send_error: str | None = None    # the send itself failed (server closed early)
    responses: list = field(default_factory=list)  # parsed responses, 1xx included
    parse_error: str | None = None

    @property
    def final(self) -> Response | None:
        for r in self.responses:
            if not (100 <= r.status < 200) or r.status == 101:
                return r
        return None

    @property
    def status(self) -> int | None:
        r = self.final
        return r.status if r else None


def exchange(addr, data: bytes, timeout: float = 2.0, stop_after_response: bool = True,
             close_wait: float = 0.1, method: str | None = None) -> Exchange:
    """Send ``data`` on a fresh connection and observe the reply.

    Reads until the server closes, ``timeout`` passes, or - with
    ``stop_after_response`` - a final (non-1xx) response is complete, after which
    it waits ``close_wait`` more seconds to see whether the server closes.
    """
    if method is None:
        method = data.split(b" ", 1)[0].decode("latin-1", "replace") if data else "GET"
    sock = socket.create_connection(addr, timeout=5.0)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    start = time.monotonic()
    send_error = None
    buf = b""
    closed = False
    closed_after = None
    first_byte_after = None
    responses: list[Response] = []
    parse_error = None
    reset = False
    try:
        try:
            if data:
                sock.sendall(data)
        except OSError as e:  # the server may close before reading everything
            send_error = f"{type(e).__name__}: {e}"
        deadline = start + timeout
        done_at = None  # when the final response completed
        while True:
            now = time.monotonic()
            limit = deadline if done_at is None else min(deadline, done_at + close_wait)
            if now >= limit:
                break
            sock.settimeout(limit - now)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed, reset, closed_after = True, True, time.monotonic() - start
                break
            if not chunk:
                closed, closed_after = True, time.monotonic() - start
                break
            if first_byte_after is None:
                first_byte_after = time.monotonic() - start
            buf += chunk
            if done_at is None and parse_error is None:
                responses, parse_error, complete = _parse_all(buf, method, eof=False)
                if complete and stop_after_response:
                    done_at = time.monotonic()
        if parse_error is None:
            responses, parse_error, _ = _parse_all(buf, method, eof=closed)
    finally:
        sock.close()
    elapsed = time.monotonic() - start
    if buf:
        outcome = "response"
    elif closed:
        outcome = "reset" if reset else "close"
    else:
        outcome = "timeout"
    return Exchange(buf, outcome, elapsed, first_byte_after, closed, closed_after, send_error,
                    responses, parse_error)


def _parse_all(buf: bytes, method: str, eof: bool) -> tuple[list[Response], str | None, bool]:
    """Responses at the front of ``buf``; complete=True once a final response is whole."""
    out = []
    pos = 0
    while pos < len(buf):
        try:
            resp, used = parse_response(buf[pos:], method, eof=eof)
        except IncompleteResponse:
            return out, None, False
        except (MalformedResponse, ValueError) as e:
            return out, str(e), False
        out.append(resp)
        pos += used
        if not (100 <= resp.status < 200) or resp.status == 101:
            return out, None, True
    return out, None, False


# --------------------------------------------------------------------------- configs


def base_config(mock_dir: Path | None = None, **overrides) -> dict:
    """A config that starts with no network: one listener on an ephemeral port."""
    cfg: dict = {"listen": ["127.0.0.1:0"]}
    if mock_dir is not None:
        cfg["routes"] = [{"name": "root", "path": "/", "mock": {"directory": str(mock_dir), "mode": "replay"}}]
    else:
        cfg["routes"] = []
    for key, value in overrides.items():
        if key == "limits":
            cfg.setdefault("limits", {}).update(value)
        else:
            cfg[key] = value
    return cfg


def write_mock_dir(directory: Path, files: dict[str, object]) -> Path:
    """Write ``{"index": {...}, "a": {...}}`` as ``index.json``, ``a.json`` ... under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        path = directory / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body if isinstance(body, str) else json.dumps(body))
    return directory
