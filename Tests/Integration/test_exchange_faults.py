"""Faults in one forwarded exchange, through the real binary with a raw upstream on loopback:
the client leaving before the response head, and an upstream closing right after its head."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from proxy import base_config, build_request, exchange, read_head, wait_until


class RawUpstream:
    """Accepts connections and, per connection, reads one request head then runs `behave(conn)`;
    over TLS when given a server context (`tls`)."""

    def __init__(self, behave, tls: ssl.SSLContext | None = None):
        self.tls = tls
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.behave = behave
        self.events: list[tuple[str, float]] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn):
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()
                return
        with conn:
            got = read_head(conn)
            if got is None:
                return
            self.note("request")
            self.last_head, self.leftover = got  # the head, and body bytes read with it
            self.behave(self, conn)

    def note(self, what: str):
        with self.lock:
            self.events.append((what, time.monotonic()))

    def count(self, what: str) -> int:
        with self.lock:
            return sum(1 for w, _ in self.events if w == what)

    def close(self):
        self.sock.close()


def route_to(port: int, timeout: float = 30, scheme: str = "http") -> dict:
    return {"name": "raw", "path": "/", "upstream": f"{scheme}://127.0.0.1:{port}/", "credential": "none",
            "timeoutSeconds": timeout}


def test_client_gone_before_the_response_head_cancels_the_upstream_transfer(start_proxy):
    """Was: the transfer ran on for the upstream's full 25 s, the client socket sat in CLOSE-WAIT,
    and the log said 200. Now the client's FIN cancels it: the upstream sees its connection close."""
    def slow(upstream, conn):
        conn.settimeout(20)
        try:
            leftover = conn.recv(1)  # b"" when the proxy closes the upstream connection
        except OSError:
            leftover = b""
        upstream.note("upstream_closed" if leftover == b"" else "unexpected_bytes")

    upstream = RawUpstream(slow)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port)]))
    clients = []
    for i in range(20):
        s = socket.create_connection((server.host, server.port))
        s.sendall(build_request("GET", f"/slow/{i}", {"Host": server.host_header, "X-Request-ID": f"gone-{i}"}))
        clients.append(s)
    assert wait_until(lambda: upstream.count("request") == 20, 5), upstream.events
    left = time.monotonic()
    for s in clients:
        s.close()
    assert wait_until(lambda: upstream.count("upstream_closed") == 20, 3), \
        f"{upstream.count('upstream_closed')} of 20 upstream connections closed 3 s after the clients left"
    closed_at = max(t for w, t in upstream.events if w == "upstream_closed")
    assert closed_at - left < 2.0
    assert wait_until(lambda: len([e for e in server.log_events("request") if e.get("requestID", "").startswith("gone-")]) == 20, 5)
    for event in server.log_events("request"):
        if event.get("requestID", "").startswith("gone-"):
            assert event["status"] == 499 and event["outcome"] == "client_closed" and event["bytesOut"] == 0, event
    upstream.close()


def test_upstream_closing_right_after_its_head_never_gives_an_empty_reply(start_proxy):
    """Was: 12 of 20 clients got nothing at all (the queued head was dropped with the connection)."""
    def short(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nabc")
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.2)

    upstream = RawUpstream(short)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port)]))
    outcomes = []
    for i in range(20):
        ex = exchange((server.host, server.port), build_request("GET", f"/short/{i}", {"Host": server.host_header}),
                      timeout=5)
        if ex.final is not None and ex.final.status == 502:
            assert b'"error":"upstream_unreachable"' in ex.final.body, ex.final
            outcomes.append("502")
        else:
            # Some of the body left before the upstream failed: the head and the bytes it had,
            # then the close (curl exit 18, "transfer closed with outstanding read data").
            assert ex.data, f"client {i} got an empty reply"
            assert ex.data.startswith(b"HTTP/1.1 200") and ex.closed and ex.final is None, ex.data
            outcomes.append("cut")
    assert all(o in ("502", "cut") for o in outcomes) and len(outcomes) == 20, outcomes
    assert outcomes.count("502") >= 1, outcomes  # the usual case: nothing had left yet
    upstream.close()


def assert_upstream_refused_as_502(start_proxy, plan, logged: str):
    """Through a raw upstream answering with `plan`: the client gets the JSON 502 and the proxy
    logs `upstream_failed` with `logged` in its error."""
    upstream = RawUpstream(plan)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port)]))
    ex = exchange((server.host, server.port), build_request("GET", "/x", {"Host": server.host_header}), timeout=5)
    assert ex.final is not None and ex.final.status == 502, ex.data
    assert b'"error":"upstream_unreachable"' in ex.final.body, ex.final
    assert wait_until(lambda: any(logged in e.get("error", "") for e in server.log_events("upstream_failed")),
                      timeout=3), server.stderr_text()
    upstream.close()


@pytest.mark.parametrize("sent", [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nX-Partial: 1\r\nContent-Le"],
                         ids=["status-line-only", "inside-a-field"])
def test_an_upstream_that_closes_inside_its_response_head_is_a_502_not_an_empty_200(start_proxy, sent):
    """Was: libcurl completes such a transfer without an error, and the head it had was relayed
    as a complete, empty 200."""
    def cut(upstream, conn):
        conn.sendall(sent)
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.2)

    assert_upstream_refused_as_502(start_proxy, cut, "inside its response head")


def test_an_upstream_response_with_differing_content_lengths_is_a_502_not_relayed(start_proxy):
    """Was: the first length was relayed and libcurl read the body by the other, so the client got a
    short body that looked complete (RFC 9112 §6.3: a proxy must not relay such a response)."""
    def two_lengths(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello")
        time.sleep(0.2)

    assert_upstream_refused_as_502(start_proxy, two_lengths, "Content-Length fields that differ")


@pytest.mark.parametrize("length", [b"0x5", b"+5", b"5.0", b"5 5", b"99999999999999999999"])
def test_an_upstream_response_whose_content_length_is_no_number_is_a_502_not_relayed(start_proxy, length):
    """Was: libcurl read `0x5` as 0 and the client got an empty
    200 that ended cleanly; `+5`, `5.0`, `5 5` and an overflowing length were read to the close and
    relayed as a complete chunked 200 (RFC 9112 §6.3: a proxy answers an invalid length with 502)."""
    def bad_length(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\nhello")
        time.sleep(0.3)

    assert_upstream_refused_as_502(start_proxy, bad_length, "Content-Length that is not a number")


def test_an_unsolicited_101_from_the_upstream_is_an_immediate_502(start_proxy):
    """The proxy never asks an upstream to switch protocols (Upgrade is hop-by-hop and dropped).
    Was: libcurl took the 101 for an interim response and
    waited for a final one, so the client got a 504 after the route's timeout."""
    def switch(upstream, conn):
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nRAWBYTES")
        time.sleep(3)

    t0 = time.monotonic()
    assert_upstream_refused_as_502(start_proxy, switch, "switched protocols (101)")
    assert time.monotonic() - t0 < 2.5, "the 502 waited for the upstream"


def test_an_upstream_head_with_a_200_kib_field_is_a_502_that_says_the_head_is_too_large(start_proxy):
    """Was: logged as libcurl's "Out of memory"."""
    def huge(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\nContent-Length: 2\r\n\r\nok")
        time.sleep(0.3)

    assert_upstream_refused_as_502(start_proxy, huge, "larger than libcurl accepts")


def answer_keep_alive(upstream: RawUpstream, conn, idle: float, delay: float = 0.0):
    """Answers the request read (after `delay` seconds) and every further one on the connection
    with a 2-byte 200, until the client closes or `idle` seconds pass without a request (the
    upstream then closes)."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    time.sleep(delay)
    conn.sendall(ok)
    conn.settimeout(idle)
    data = upstream.leftover
    while True:
        try:
            chunk = conn.recv(65536)
        except OSError:
            return
        if not chunk:
            return
        data += chunk
        while b"\r\n\r\n" in data:
            data = data.split(b"\r\n\r\n", 1)[1]
            conn.sendall(ok)


def socket_fds(pid: int) -> int:
    import os
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def test_pooled_upstream_connections_the_upstream_closed_are_reaped_while_idle(start_proxy):
    """Was: each stayed in CLOSE-WAIT, holding a descriptor, until the next upstream request."""
    # The upstream's keep-alive timeout is 1.5 s. Its first answers wait 0.3 s, so the 16 requests
    # overlap and need connections of their own: answered at once, a fast proxy served them one
    # after another on one pooled connection, and the test found nothing to reap.
    upstream = RawUpstream(lambda up, conn: answer_keep_alive(up, conn, idle=1.5, delay=0.3))
    server = start_proxy(config=base_config(routes=[route_to(upstream.port)], workers=1))
    time.sleep(0.3)
    baseline = socket_fds(server.pid)
    barrier = threading.Barrier(16)
    statuses = []

    def one(i):
        barrier.wait()
        statuses.append(exchange((server.host, server.port),
                                 build_request("GET", f"/p/{i}", {"Host": server.host_header, "Connection": "close"}),
                                 timeout=5).status)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert statuses == [200] * 16, statuses
    pooled = socket_fds(server.pid) - baseline
    assert pooled >= 4, f"expected pooled upstream connections, saw {pooled} extra sockets"
    # the upstream closes them after 1.5 s; nothing else happens on the proxy
    assert wait_until(lambda: socket_fds(server.pid) <= baseline + 1, 5), \
        f"{socket_fds(server.pid) - baseline} upstream sockets still held 5 s after the burst (the upstream closed them after 1.5 s)"
    upstream.close()


def test_at_the_descriptor_limit_clients_beyond_the_budget_get_503_and_forwarding_keeps_working(tmp_path):
    """Was (ulimit -n 256, 400 clients): accepted clients used up every descriptor, every request
    got 502 "Couldn't connect", accept_failed was logged 10 times a second, and no warning came."""
    import json
    import resource
    import subprocess
    from proxy import ProxyProcess, require_binary

    def slow_ok(upstream, conn):
        time.sleep(1.0)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    upstream = RawUpstream(slow_ok)
    config = base_config(routes=[route_to(upstream.port)], workers=1)
    server = ProxyProcess(config, tmp_path / "run")
    server.workdir.mkdir(parents=True, exist_ok=True)
    server.config_path.write_text(json.dumps(config))

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    with open(server.log_path, "wb") as log:
        server.proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(server.config_path)],
                                       stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=limit)
    try:
        server._wait_for_listening()
        warnings = server.log_events("descriptor_limit")
        assert len(warnings) == 1 and warnings[0]["clientsServed"] == 96, warnings
        results: list[int | None] = []
        lock = threading.Lock()

        def client(i):
            ex = exchange((server.host, server.port), build_request("GET", f"/f/{i}", {"Host": server.host_header}),
                          timeout=10)
            with lock:
                results.append(ex.status)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(300)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert len(results) == 300
        assert results.count(502) == 0, f"{results.count(502)} requests got 502: the upstream side ran out of descriptors"
        assert results.count(200) >= 90, results
        assert set(results) <= {200, 503}, sorted(set(map(str, results)))
        assert len(server.log_events("accept_failed")) <= 2, len(server.log_events("accept_failed"))
    finally:
        server.stop()
        upstream.close()


def test_a_long_upload_is_not_cut_by_the_head_timeout(start_proxy):
    """Was: with timeoutSeconds 3, every upload that took longer than 3 s got 504 (the wait for the
    response head counted from the start). Now it counts from the request's last byte."""
    size = 12 * 1024 * 1024

    def read_all_then_answer(upstream, conn):
        # the head was read by RawUpstream; read the body to its end, then answer with its size
        conn.settimeout(20)
        got = len(upstream.leftover)
        while got < size:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        body = str(got).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    upstream = RawUpstream(read_all_then_answer)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port, timeout=1.5)],
                                            limits={"maxBodyBytes": 64 * 1024 * 1024}))
    s = socket.create_connection((server.host, server.port))
    s.sendall(build_request("PUT", "/upload", {"Host": server.host_header, "Content-Length": str(size),
                                                "Connection": "close"}))
    started = time.monotonic()
    piece = b"x" * (256 * 1024)
    for _ in range(size // len(piece)):  # about 4 s in all: longer than the 1.5 s head timeout
        s.sendall(piece)
        time.sleep(0.08)
    took = time.monotonic() - started
    s.settimeout(10)
    reply = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    assert took > 3, f"the upload took only {took:.1f} s"
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert reply.endswith(str(size).encode()), reply[-100:]
    upstream.close()


def _stream(upstream_plan, timeout: float, start_proxy, seconds: float):
    """Starts a proxy on a route with `timeout`, asks for /stream, and reads the relayed response
    for up to `seconds`: (what came, when the connection closed or None, the proxy)."""
    upstream = RawUpstream(upstream_plan)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port, timeout=timeout)]))
    s = socket.create_connection((server.host, server.port))
    s.sendall(build_request("GET", "/stream", {"Host": server.host_header, "Connection": "close"}))
    s.settimeout(0.5)
    started, data, closed = time.monotonic(), b"", None
    while time.monotonic() - started < seconds:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            closed = time.monotonic() - started
            break
        data += chunk
    s.close()
    upstream.close()
    return data, closed, server


def test_a_stream_that_sends_a_heartbeat_more_often_than_the_timeout_is_never_cut(start_proxy):
    """Was: libcurl's low-speed check averaged bytes per second, so a byte every 3 s (under its
    1 byte/s) was cut after timeoutSeconds although no gap came near it."""
    def heartbeat(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(4):
                time.sleep(3)
                conn.sendall(b"1\r\n\n\r\n")
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass

    data, closed, _ = _stream(heartbeat, 5, start_proxy, 16)
    assert closed is not None and closed > 11, (closed, data[-200:])
    assert data.count(b"1\r\n\n\r\n") == 4 and data.endswith(b"0\r\n\r\n"), data[-200:]


def test_a_response_body_that_stalls_for_the_timeout_is_cut_and_logged(start_proxy):
    def stall(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
        time.sleep(8)

    data, closed, server = _stream(stall, 2, start_proxy, 8)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"abc"), data
    assert closed is not None and 1.8 < closed < 4, closed
    assert wait_until(lambda: any("no byte moved for 2" in e.get("error", "")
                                  for e in server.log_events("upstream_failed")), timeout=3), server.stderr_text()


def test_a_client_sending_its_body_slowly_to_an_upstream_that_answers_as_it_arrives_is_not_a_stall(start_proxy):
    """The upstream sends its head at once and echoes each body byte it reads; the client sends a
    byte every 3 s against a 2 s timeout. Was: cut at 2 s as "no byte moved" (a fault injector
    found the client's held side counted once the head had come)."""
    def echo(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        data, got = upstream.leftover, len(upstream.leftover)
        conn.settimeout(20)
        while True:
            if data:
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            if got >= 4:
                break
            data = conn.recv(65536)
            if not data:
                return
            got += len(data)
        conn.sendall(b"0\r\n\r\n")

    upstream = RawUpstream(echo)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port, timeout=2)]))
    s = socket.create_connection((server.host, server.port))
    s.sendall(build_request("POST", "/duplex", {"Host": server.host_header, "Content-Length": "4",
                                                 "Connection": "close"}) + b"a")
    for byte in b"bcd":
        time.sleep(3)
        s.sendall(bytes([byte]))
    s.settimeout(10)
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    s.close()
    upstream.close()
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"0\r\n\r\n"), reply
    assert reply.split(b"\r\n\r\n", 1)[1].replace(b"1\r\n", b"").replace(b"\r\n", b"").startswith(b"abcd"), reply


def test_an_upstream_head_with_a_folded_line_is_a_502_not_relayed_without_what_it_continues(start_proxy):
    """Was: the continuation line was dropped, so `Connection: keep-alive,\\r\\n X-Hop` let X-Hop
    through and a folded Set-Cookie lost HttpOnly and Secure (RFC 9112 §5.2: a proxy answers 502
    or unfolds)."""
    def folded(upstream, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: keep-alive,\r\n X-Hop\r\nX-Hop: internal\r\n"
                     b"Set-Cookie: sid=abc; Path=/;\r\n HttpOnly; Secure\r\nContent-Length: 2\r\n\r\nok")
        time.sleep(0.2)

    assert_upstream_refused_as_502(start_proxy, folded, "obsolete line folding")


def _loopback_name() -> str | None:
    """A host name other than `localhost` (which libcurl answers itself) that resolves to
    127.0.0.1 only, so libcurl's threaded resolver (and its socketpair) serves it; None if none."""
    for name in (socket.gethostname(), "localhost.localdomain"):
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)}
        except OSError:
            continue
        if name != "localhost" and addresses == {"127.0.0.1"}:
            return name
    return None


def test_failed_connects_between_pooled_requests_leave_no_stale_watch(start_proxy):
    """libcurl 7.88 closes a socket that never connected without the closing callback. Its
    descriptor number is then reused: by the next connection's socket, or by the resolver's
    socketpair of a host name. Each must still be watched: every live request answers at once,
    however failed connects and lookups interleave on the one loop."""
    live = RawUpstream(lambda up, conn: answer_keep_alive(up, conn, idle=5))
    # A listener that never accepts, its backlog full: a connect to it hangs until libcurl's
    # connect timeout (the route's 1 s), watched for writing all along, then is closed unconnected.
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    dead_port = full.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", dead_port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    routes = [
        {"name": "dead", "path": "/dead", "upstream": f"http://127.0.0.1:{dead_port}/", "credential": "none", "timeoutSeconds": 1},
        {"name": "live", "path": "/live", "upstream": f"http://127.0.0.1:{live.port}/", "credential": "none", "timeoutSeconds": 3},
    ]
    name = _loopback_name()
    if name:
        routes.append({"name": "named", "path": "/named", "upstream": f"http://{name}:{live.port}/", "credential": "none",
                       "timeoutSeconds": 3})
    server = start_proxy(config=base_config(routes=routes, workers=1))
    paths = ["/dead/x", "/live/x"] + (["/named/x"] if name else [])
    for round_ in range(4):
        for path in paths:
            started = time.monotonic()
            got = exchange((server.host, server.port), build_request("GET", path, {"Host": server.host_header}), timeout=5)
            took = time.monotonic() - started
            if path.startswith("/dead"):
                assert got.status in (502, 504), (round_, path, got.status)
            else:
                assert got.status == 200 and took < 0.9, (round_, path, got.status, took)
    live.close()
    for filler in fillers:
        filler.close()
    full.close()
