"""A recording analytics endpoint for the analytics sidecar tests.

Standard library only. ``AnalyticsSink().start()`` listens on an ephemeral
127.0.0.1 port (HTTP/1.1, keep-alive, one thread per connection) and records
every request as an ``Upload``: arrival time, method, path, headers, the raw
body, the body parsed as JSON (None if it is not JSON) and the status it was
answered with.

What it answers is decided per request by ``sink.respond``, a callable
``(upload) -> int``; the default answers 200. ``0`` means: close the
connection without answering (a network failure for the sender). Helpers:

- ``sink.script([503, 503])``  these statuses for the next requests, then 200
- ``sink.reject_if(pred, 400)``  ``400`` for uploads whose body matches ``pred``, else 200
- ``sink.always(status)``        that status for every request

``python3 analytics_sink.py [PORT]`` runs one standalone and prints what arrives.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Upload:
    at: float                      # time.monotonic() when the body was read
    method: str
    path: str
    headers: dict                  # lower-cased names -> value (last one wins)
    header_list: list              # (name, value) in order, duplicates kept
    raw: bytes
    body: object | None            # the JSON body, or None
    status: int = 0                # what the sink answered (0: closed without answering)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def data(self) -> list:
        if isinstance(self.body, dict) and isinstance(self.body.get("data"), list):
            return self.body["data"]
        return []

    def pairs(self) -> list[tuple[str, str]]:
        return [(d.get("key"), d.get("value")) for d in self.data if isinstance(d, dict)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "analytics-sink/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _handle(self):
        sink: AnalyticsSink = self.server.sink  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        upload = Upload(time.monotonic(), self.command, self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        list(self.headers.items()), raw, body)
        with sink.lock:
            try:
                status = int(sink.respond(upload))
            except Exception:  # a broken policy must not hang the sender
                status = 500
            upload.status = status
            sink.uploads.append(upload)
            sink.cond.notify_all()
        if status == 0:
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        payload = json.dumps({"status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if 300 <= status < 400 and sink.location:
            self.send_header("Location", sink.location)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = _handle
    do_PUT = _handle
    do_GET = _handle


class AnalyticsSink:
    """The recording endpoint; see the module docstring."""

    def __init__(self, path: str = "/analytics/"):
        self.path = path
        self.uploads: list[Upload] = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.respond = lambda upload: 200
        self.location: str | None = None  # the Location of a 3xx answer, if set
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self, port: int = 0) -> "AnalyticsSink":
        server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        server.daemon_threads = True
        server.sink = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="analytics-sink", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    # -- policies

    def always(self, status: int) -> None:
        self.respond = lambda upload: status

    def script(self, statuses: list[int], then: int = 200) -> None:
        queue = list(statuses)

        def respond(upload):
            return queue.pop(0) if queue else then
        self.respond = respond

    def reject_if(self, predicate, status: int = 400) -> None:
        self.respond = lambda upload: status if predicate(upload) else 200

    # -- what arrived

    def snapshot(self) -> list[Upload]:
        with self.lock:
            return list(self.uploads)

    def accepted(self) -> list[Upload]:
        """Uploads answered 2xx."""
        return [u for u in self.snapshot() if 200 <= u.status < 300]

    def accepted_pairs(self) -> Counter:
        """(key, value) -> how many times it arrived in an accepted upload."""
        c: Counter = Counter()
        for u in self.accepted():
            c.update(u.pairs())
        return c

    def wait_for(self, predicate, timeout: float = 10.0, what: str = "uploads"):
        """Wait until ``predicate(list_of_uploads)`` is truthy; returns the uploads."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                uploads = list(self.uploads)
                if predicate(uploads):
                    return uploads
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}; "
                                         f"{len(uploads)} uploads so far: "
                                         f"{[(u.status, len(u.data)) for u in uploads][:40]}")
                self.cond.wait(min(left, 0.1))


if __name__ == "__main__":
    sink = AnalyticsSink().start(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(f"listening on {sink.url}", flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.2)
            uploads = sink.snapshot()
            for u in uploads[seen:]:
                print(u.status, u.header("authorization"), u.raw[:500].decode(errors="replace"), flush=True)
            seen = len(uploads)
    except KeyboardInterrupt:
        sink.stop()
