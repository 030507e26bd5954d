"""WebSocket tunnels and event streams through the real binary (docs/websockets.md), with a real
WebSocket peer on both sides (PyPI `websockets`): the handshake carries the route's credentials,
bytes cross both ways in order, close handshakes pass either way, `wss` upstreams work with a
private CA, cross-site handshakes never reach the upstream, logout closes the credentialed
tunnels only, idle tunnels and quiet event streams outlive `timeoutSeconds`, SIGTERM closes
open tunnels, and a thousand idle tunnels stay open.

    PLATFORM_PROXY_BIN=.build/debug/platform-proxy python -m pytest -q Tests/Integration/test_websockets.py
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import threading
import time
from http import HTTPStatus

import pytest

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import serve  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from credentials_support import free_port, idp_factory, launch, wait_until  # noqa: E402,F401  (fixture)
from proxy import base_config  # noqa: E402
from test_credentials import unsigned_jwt  # noqa: E402
from test_reload import reload_with  # noqa: E402

TOKEN = "demo-access-" + "w" * 24
FLOOD_MESSAGE = 64 * 1024
TUNNEL_QUEUE_CAP = 256 * 1024  # TunnelTable.queueCap


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


class WSUpstream:
    """A `websockets` server on its own thread and event loop: echoes every message, records each
    handshake's headers, closes with 4000 when asked (`server-close`), refuses `/refuse` with 403."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None):
        self.handshakes: list[dict] = []
        self.open = 0
        self.closed_codes: list[int | None] = []
        self.flood_sent = 0
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.ssl_context = ssl_context
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the WebSocket upstream did not start"

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self):
        self.stop_event = asyncio.Event()
        async with serve(self._handler, "127.0.0.1", self.port, ssl=self.ssl_context, max_size=None,
                         process_request=self._process, ping_interval=None, compression=None):
            self.ready.set()
            await self.stop_event.wait()

    def _process(self, connection, request):
        self.handshakes.append({k.lower(): v for k, v in request.headers.raw_items()} | {":path": request.path})
        if request.path.startswith("/ws/refuse"):
            return connection.respond(HTTPStatus.FORBIDDEN, "refused by upstream\n")
        if request.path.startswith("/api/"):
            # A plain HTTP resource that refuses every token (drives a 401 refresh).
            return connection.respond(HTTPStatus.UNAUTHORIZED, "token refused\n")
        return None

    async def _handler(self, ws):
        self.open += 1
        if "deaf" in ws.request.path:
            # Reads nothing for a while, then counts what came.
            await asyncio.sleep(4)
            self.deaf_received = 0
            try:
                async for _ in ws:
                    self.deaf_received += 1
            except ConnectionClosed:
                pass
            self.open -= 1
            return
        try:
            async for message in ws:
                if message == "server-close":
                    await ws.close(4000, "server says bye")
                    break
                if isinstance(message, str) and message.startswith("flood "):
                    for i in range(int(message.split()[1])):
                        await ws.send(i.to_bytes(4, "big") + bytes(FLOOD_MESSAGE - 4))
                        self.flood_sent = i + 1
                    await ws.send("flood-done")
                    continue
                await ws.send(message)
        except ConnectionClosed:
            pass
        finally:
            self.open -= 1
            self.closed_codes.append(ws.close_code)

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(10)


class ThreadedRawServer:
    """A loopback listener serving each connection on its own thread with `_serve(conn)`."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()


class QuietEventStream(ThreadedRawServer):
    """An HTTP/1.1 upstream answering `/events` with `text/event-stream` (or `/plain` with
    `application/octet-stream` unframed): one event, then `quiet` seconds of nothing, then one more."""

    def __init__(self, quiet: float):
        self.quiet = quiet
        super().__init__()

    def _serve(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            kind = b"text/event-stream" if b"/events" in data.split(b"\r\n")[0] else b"application/octet-stream"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nConnection: close\r\n\r\n")
            conn.sendall(b"data: first\n\n")
            time.sleep(self.quiet)
            conn.sendall(b"data: second\n\n")

    def close(self):
        self.sock.close()


@pytest.fixture
def ws_upstream():
    upstream = WSUpstream()
    yield upstream
    upstream.stop()


def ws_routes(port: int, scheme: str = "http", credential: str = "access_token", **extra) -> list[dict]:
    return [
        {"name": "ws", "path": "/ws", "upstream": f"{scheme}://127.0.0.1:{port}/ws", "credential": credential, **extra},
        {"name": "open", "path": "/open", "upstream": f"{scheme}://127.0.0.1:{port}/open", **extra},
    ]


def demo_proxy(start_proxy, idp_factory, tmp_path, routes, extra=None):  # noqa: F811
    """A proxy logged in with the demo login (token `TOKEN`), serving `routes`."""
    idp = idp_factory()
    demo_id = unsigned_jwt({"sub": "ws-user", "exp": int(time.time()) + 600})
    proxy = launch(start_proxy, idp, tmp_path, routes=routes, extra=extra, provider_extra={
        "demo": {"accessToken": TOKEN, "idToken": demo_id, "expiresInSeconds": 600}})
    post(proxy.port, "/_platform/login/demo")
    return proxy


def post(port: int, path: str):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", path, body=b"", headers={"Content-Length": "0"})
        assert conn.getresponse().status == 200, path
    finally:
        conn.close()


def plain_proxy(start_proxy, routes, **overrides):
    return start_proxy(base_config(routes=routes, **overrides))


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def ws_url(port: int, path: str) -> str:
    return f"ws://127.0.0.1:{port}{path}"


# --------------------------------------------------------------------------- through the tunnel


def test_websocket_messages_cross_the_tunnel_with_the_routes_credentials(start_proxy, idp_factory, tmp_path,  # noqa: F811
                                                                          ws_upstream):
    proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(ws_upstream.port))

    async def scenario():
        async with connect(ws_url(proxy.port, "/ws/chat?room=1"), max_size=None, ping_interval=None,
                           compression=None) as ws:
            await ws.send("hello")
            assert await ws.recv() == "hello"
            await ws.send(b"\x00\x01\xfe\xff")
            assert await ws.recv() == b"\x00\x01\xfe\xff"
            big = os.urandom(1 << 20)
            await ws.send(big)
            assert await ws.recv() == big
            for i in range(3000):
                await ws.send(f"m{i}")
            for i in range(3000):
                assert await ws.recv() == f"m{i}"

    run(scenario())
    handshake = ws_upstream.handshakes[-1]
    assert handshake[":path"] == "/ws/chat?room=1"
    assert handshake["authorization"] == f"Bearer {TOKEN}"
    assert handshake["x-authorization"] == f"Bearer {TOKEN}"
    assert handshake["host"] == f"127.0.0.1:{ws_upstream.port}"
    wait_until(lambda: proxy.server.log_events("tunnel_closed"), timeout=5, what="tunnel_closed logged")
    closed = proxy.server.log_events("tunnel_closed")[-1]
    assert closed["route"] == "ws" and closed["bytesUp"] > (1 << 20) and closed["bytesDown"] > (1 << 20)


def test_close_handshake_from_the_client_and_from_the_upstream(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))

    async def scenario():
        ws = await connect(ws_url(proxy.port, "/open/a"), ping_interval=None)
        await ws.send("x")
        assert await ws.recv() == "x"
        await ws.close(1000, "client done")
        assert ws.close_code == 1000
        ws = await connect(ws_url(proxy.port, "/open/b"), ping_interval=None)
        await ws.send("server-close")
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd.code == 4000 and closed.value.rcvd.reason == "server says bye"

    run(scenario())
    wait_until(lambda: 1000 in ws_upstream.closed_codes and 4000 in ws_upstream.closed_codes, timeout=5,
               what="both closes seen by the upstream")
    wait_until(lambda: 'platform_proxy_tunnels_open{route="open"} 0' in metrics_text(proxy.port), timeout=5,
               what="no tunnel open in the metrics")
    tunnels = {line for line in metrics_text(proxy.port).splitlines() if line.startswith("platform_proxy_tunnels_")}
    assert tunnels == {'platform_proxy_tunnels_open{route="open"} 0', 'platform_proxy_tunnels_opened_total{route="open"} 2',
                       'platform_proxy_tunnels_closed_total{route="open",reason="upstream_closed"} 2'}, tunnels


def test_refused_upgrade_is_relayed_as_a_response(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))

    async def scenario():
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(proxy.port, "/ws/refuse"), ping_interval=None)
        return refused.value.response

    response = run(scenario())
    assert response.status_code == 403
    assert response.body == b"refused by upstream\n"
    # The upstream saw an upgrade request (not one stripped of its Upgrade field).
    assert ws_upstream.handshakes[-1]["upgrade"] == "websocket"


def test_a_client_that_does_not_read_holds_the_upstream_back(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))
    count = 1600  # 100 MiB: far more than the socket buffers on the way hold

    async def scenario():
        async with connect(ws_url(proxy.port, "/open/flood"), max_size=None, max_queue=1, ping_interval=None,
                           compression=None) as ws:
            before = rss_kib(proxy.proc.pid)
            await ws.send(f"flood {count}")
            await asyncio.sleep(3)
            held_at = ws_upstream.flood_sent
            grown = rss_kib(proxy.proc.pid) - before
            assert held_at < count // 2, f"the upstream sent {held_at} of {count} messages to a client that read none"
            assert grown < 16 * 1024, f"the proxy grew {grown} KiB while its client did not read"
            for i in range(count):
                message = await ws.recv()
                assert int.from_bytes(message[:4], "big") == i and len(message) == FLOOD_MESSAGE
            assert await ws.recv() == "flood-done"

    run(scenario(), timeout=120)


def test_an_upstream_that_does_not_read_holds_the_client_back(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))
    count = 1600

    async def scenario():
        async with connect(ws_url(proxy.port, "/open/deaf"), max_size=None, ping_interval=None, compression=None,
                           write_limit=65536) as ws:
            before = rss_kib(proxy.proc.pid)
            sent = 0

            async def flood():
                nonlocal sent
                for i in range(count):
                    await ws.send(i.to_bytes(4, "big") + bytes(FLOOD_MESSAGE - 4))
                    sent = i + 1

            task = asyncio.create_task(flood())
            await asyncio.sleep(3)
            grown = rss_kib(proxy.proc.pid) - before
            assert sent < count // 2, f"the client sent {sent} of {count} messages to an upstream that read none"
            assert grown < 16 * 1024, f"the proxy grew {grown} KiB while its upstream did not read"
            await asyncio.wait_for(task, 60)
            await ws.close()

    run(scenario(), timeout=120)
    wait_until(lambda: getattr(ws_upstream, "deaf_received", 0) == count, timeout=30, what="every message delivered")


def test_cross_site_handshake_is_refused_before_the_upstream(start_proxy, idp_factory, tmp_path,  # noqa: F811
                                                              ws_upstream):
    proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(ws_upstream.port))

    async def refused(**headers):
        with pytest.raises(InvalidStatus) as refusal:
            await connect(ws_url(proxy.port, "/ws/x"), ping_interval=None, **headers)
        return refusal.value.response

    foreign_origin = run(refused(origin="https://evil.example"))
    assert foreign_origin.status_code == 403 and b"origin_not_allowed" in foreign_origin.body
    cross_site = run(refused(additional_headers={"Sec-Fetch-Site": "cross-site"}))
    assert cross_site.status_code == 403 and b"cross_site_request" in cross_site.body
    assert ws_upstream.handshakes == []

    async def same_origin():
        async with connect(ws_url(proxy.port, "/ws/x"), ping_interval=None,
                           additional_headers={"Sec-Fetch-Site": "same-origin"}) as ws:
            await ws.send("ok")
            assert await ws.recv() == "ok"

    run(same_origin())
    assert len(ws_upstream.handshakes) == 1


def test_wss_upstream_with_a_private_ca(start_proxy, tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    from test_tls_upstream import make_ca_and_cert
    ca, cert, key = make_ca_and_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream = WSUpstream(ssl_context=context)
    try:
        proxy = start_proxy(base_config(routes=[{"name": "wss", "path": "/wss",
                                                 "upstream": f"https://127.0.0.1:{upstream.port}/ws"}]),
                            env={"CURL_CA_BUNDLE": str(ca)})

        async def scenario():
            async with connect(ws_url(proxy.port, "/wss/tls"), max_size=None, ping_interval=None) as ws:
                big = os.urandom(300_000)
                await ws.send(big)
                assert await ws.recv() == big
                for i in range(500):
                    await ws.send(f"t{i}")
                for i in range(500):
                    assert await ws.recv() == f"t{i}"

        run(scenario())
        assert upstream.handshakes[-1][":path"] == "/ws/tls"
    finally:
        upstream.stop()


def test_logout_closes_the_credentialed_tunnels_but_not_the_others(start_proxy, idp_factory, tmp_path,  # noqa: F811
                                                                   ws_upstream):
    proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(ws_upstream.port))

    async def scenario():
        credentialed = await connect(ws_url(proxy.port, "/ws/c"), ping_interval=None)
        other = await connect(ws_url(proxy.port, "/open/o"), ping_interval=None)
        await credentialed.send("before")
        assert await credentialed.recv() == "before"
        await asyncio.to_thread(post, proxy.port, "/_platform/logout")
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(credentialed.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        await other.send("still here")
        assert await other.recv() == "still here"
        await other.close()

    run(scenario())
    wait_until(lambda: any(e.get("reason") == "logout" for e in proxy.server.log_events("tunnel_closed")),
               timeout=5, what="tunnel_closed reason=logout")


def test_an_idle_tunnel_outlives_timeout_seconds(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, [
        {"name": "open", "path": "/open", "upstream": f"http://127.0.0.1:{ws_upstream.port}/open", "timeoutSeconds": 2}])

    async def idle_tunnel():
        async with connect(ws_url(proxy.port, "/open/idle"), ping_interval=None) as ws:
            await asyncio.sleep(3.5)
            await ws.send("after quiet")
            assert await ws.recv() == "after quiet"

    run(idle_tunnel())


def read_stream(port: int, path: str) -> tuple[bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    started = time.monotonic()
    conn.request("GET", path)
    response = conn.getresponse()
    assert response.status == 200
    try:
        body = response.read()
    except http.client.IncompleteRead as cut:
        body = cut.partial
    conn.close()
    return body, time.monotonic() - started


def test_a_quiet_event_stream_outlives_timeout_seconds(start_proxy):
    events = QuietEventStream(quiet=3.5)
    try:
        proxy = plain_proxy(start_proxy, [
            {"name": "sse", "path": "/sse", "upstream": f"http://127.0.0.1:{events.port}", "timeoutSeconds": 2}])
        body, _ = read_stream(proxy.port, "/sse/events")
        assert b"data: first" in body and b"data: second" in body
        # Another type is still cut after timeoutSeconds of quiet.
        body, took = read_stream(proxy.port, "/sse/plain")
        assert b"data: first" in body and b"data: second" not in body and took < 3.4
    finally:
        events.close()


def test_stream_idle_timeout_seconds_sets_the_quiet_allowed_to_any_response(start_proxy):
    events = QuietEventStream(quiet=3.5)
    try:
        proxy = plain_proxy(start_proxy, [
            {"name": "long", "path": "/long", "upstream": f"http://127.0.0.1:{events.port}", "timeoutSeconds": 2,
             "streamIdleTimeoutSeconds": 10},
            {"name": "short", "path": "/short", "upstream": f"http://127.0.0.1:{events.port}", "timeoutSeconds": 2,
             "streamIdleTimeoutSeconds": 1},
        ])
        body, _ = read_stream(proxy.port, "/long/plain")
        assert b"data: second" in body
        # Set shorter, it cuts even an event stream.
        body, took = read_stream(proxy.port, "/short/events")
        assert b"data: first" in body and b"data: second" not in body and took < 3
    finally:
        events.close()


def test_tunnel_idle_timeout_closes_a_quiet_tunnel(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, [{"name": "open", "path": "/open", "upstream": f"http://127.0.0.1:{ws_upstream.port}/open",
                                       "tunnelIdleTimeoutSeconds": 1}])

    async def scenario():
        ws = await connect(ws_url(proxy.port, "/open/quiet"), ping_interval=None)
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001

    run(scenario())
    wait_until(lambda: any(e.get("reason") == "idle_timeout" for e in proxy.log_events("tunnel_closed")),
               timeout=5, what="tunnel_closed reason=idle_timeout")


def test_sigterm_closes_open_tunnels(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))

    async def scenario():
        sockets = [await connect(ws_url(proxy.port, f"/open/{i}"), ping_interval=None) for i in range(5)]
        for ws in sockets:
            await ws.send("hi")
            assert await ws.recv() == "hi"
        started = time.monotonic()
        proxy.signal(signal.SIGTERM)
        for ws in sockets:
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
        return time.monotonic() - started

    elapsed = run(scenario())
    assert elapsed < 10
    assert proxy.wait(timeout=15) == 0


def test_a_thousand_idle_tunnels(start_proxy, ws_upstream):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 5000:
        pytest.skip(f"the descriptor limit {hard} is too low for 1,000 tunnels on both sides")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))
    count = 1000

    async def scenario():
        sockets = []
        for start in range(0, count, 100):
            sockets += await asyncio.gather(*(connect(ws_url(proxy.port, f"/open/{i}"), ping_interval=None)
                                              for i in range(start, start + 100)))
        # The upstream counts a connection in its handler, which may run just after its 101 left.
        deadline = time.monotonic() + 5
        while ws_upstream.open < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert ws_upstream.open == count
        await asyncio.sleep(1)
        for i, ws in enumerate(sockets[::50]):
            await ws.send(f"alive {i}")
            assert await ws.recv() == f"alive {i}"
        await asyncio.gather(*(ws.close() for ws in sockets))

    run(scenario(), timeout=120)
    wait_until(lambda: ws_upstream.open == 0, timeout=20, what="every upstream connection closed")


def test_reload_moving_a_route_closes_its_tunnels_only(start_proxy, ws_upstream):
    other = WSUpstream()
    try:
        routes = [{"name": "moved", "path": "/moved", "upstream": f"http://127.0.0.1:{ws_upstream.port}/moved"},
                  {"name": "kept", "path": "/kept", "upstream": f"http://127.0.0.1:{ws_upstream.port}/kept"}]
        proxy = plain_proxy(start_proxy, routes)

        async def scenario():
            moved = await connect(ws_url(proxy.port, "/moved/a"), ping_interval=None)
            kept = await connect(ws_url(proxy.port, "/kept/a"), ping_interval=None)
            reload_with(proxy, dict(proxy.config, routes=[
                dict(routes[0], upstream=f"http://127.0.0.1:{other.port}/moved"), routes[1]]))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(moved.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
            await kept.send("still here")
            assert await kept.recv() == "still here"
            await kept.close()
            async with connect(ws_url(proxy.port, "/moved/b"), ping_interval=None) as again:
                await again.send("new upstream")
                assert await again.recv() == "new upstream"

        run(scenario())
        assert other.handshakes[-1][":path"] == "/moved/b"
        wait_until(lambda: any(e.get("reason") == "route_changed" for e in proxy.log_events("tunnel_closed")),
                   timeout=5, what="tunnel_closed reason=route_changed")
    finally:
        other.stop()


def test_reload_changing_a_routes_path_closes_the_tunnels_it_no_longer_serves(start_proxy, ws_upstream):
    """A tunnel opened under a path its route no longer serves after a reload closes with 1001, as
    for a moved upstream; a route whose new path still serves its tunnels keeps them."""
    upstream = f"http://127.0.0.1:{ws_upstream.port}/echo"
    routes = [{"name": "renamed", "path": "/old", "upstream": upstream},
              {"name": "kept", "path": "/kept", "upstream": upstream}]
    proxy = plain_proxy(start_proxy, routes)

    async def scenario():
        renamed = await connect(ws_url(proxy.port, "/old/a"), ping_interval=None)
        kept = await connect(ws_url(proxy.port, "/kept/a"), ping_interval=None)
        reload_with(proxy, dict(proxy.config, routes=[dict(routes[0], path="/new"), dict(routes[1], path="/kept/")]))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(renamed.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        await kept.send("still here")
        assert await kept.recv() == "still here"
        await kept.close()
        async with connect(ws_url(proxy.port, "/new/b"), ping_interval=None) as again:
            await again.send("new path")
            assert await again.recv() == "new path"

    run(scenario())
    wait_until(lambda: len(proxy.log_events("tunnel_closed")) == 3, timeout=5, what="three tunnel_closed lines")
    closes = [e.get("reason") for e in proxy.log_events("tunnel_closed")]
    assert closes.count("route_changed") == 1, closes


def test_a_token_refused_by_an_upstream_and_replaced_closes_the_tunnels_carrying_it(start_proxy, idp_factory,  # noqa: F811
                                                                                   tmp_path, ws_upstream):
    from credentials_support import login
    idp = idp_factory()
    routes = ws_routes(ws_upstream.port) + [
        {"name": "api", "path": "/api", "upstream": f"http://127.0.0.1:{ws_upstream.port}/api", "credential": "access_token",
         "retryOn401": True}]
    proxy = launch(start_proxy, idp, tmp_path, routes=routes, refresh_before=1)
    login(proxy)

    async def scenario():
        credentialed = await connect(ws_url(proxy.port, "/ws/c"), ping_interval=None)
        other = await connect(ws_url(proxy.port, "/open/o"), ping_interval=None)
        refused = await asyncio.to_thread(proxy.call, "/api/thing")
        assert refused.status == 401
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(credentialed.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        await other.send("still here")
        assert await other.recv() == "still here"
        await other.close()
        # A new tunnel carries the new token.
        async with connect(ws_url(proxy.port, "/ws/again"), ping_interval=None) as again:
            await again.send("x")
            assert await again.recv() == "x"

    run(scenario())
    first, last = ws_upstream.handshakes[0]["authorization"], ws_upstream.handshakes[-1]["authorization"]
    assert first != last
    wait_until(lambda: any(e.get("reason") == "token_refused" for e in proxy.server.log_events("tunnel_closed")),
               timeout=5, what="tunnel_closed reason=token_refused")


def test_a_route_pointing_at_the_proxy_itself_is_refused_not_tunnelled_into_itself(start_proxy):
    port = free_port()
    proxy = start_proxy(base_config(listen=[f"127.0.0.1:{port}"],
                                    routes=[{"name": "self", "path": "/self", "upstream": f"http://127.0.0.1:{port}/self"}]))

    async def scenario():
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(proxy.port, "/self/x"), ping_interval=None, open_timeout=10)
        return refused.value.response

    response = run(scenario())
    assert response.status_code == 508 and b"loop_detected" in response.body
    # One tunnel refused, none chained behind it.
    closed = [line for line in metrics_text(proxy.port).splitlines() if line.startswith("platform_proxy_tunnels_closed_total")]
    assert closed == ['platform_proxy_tunnels_closed_total{route="self",reason="loop_detected"} 1'], closed


def metrics_text(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/_platform/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        conn.close()


def test_tunnels_past_the_process_cap_are_refused(start_proxy, ws_upstream):
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"), limits={"maxTunnels": 2})

    async def scenario():
        first = await connect(ws_url(proxy.port, "/open/1"), ping_interval=None)
        second = await connect(ws_url(proxy.port, "/open/2"), ping_interval=None)
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(proxy.port, "/open/3"), ping_interval=None)
        assert refused.value.response.status_code == 503 and b"too_many_tunnels" in refused.value.response.body
        await first.close()
        await asyncio.sleep(0.2)
        # A closed tunnel frees its place.
        async with connect(ws_url(proxy.port, "/open/4"), ping_interval=None) as fourth:
            await fourth.send("in")
            assert await fourth.recv() == "in"
        await second.close()

    run(scenario())


def test_the_per_client_cap_holds_across_workers_and_every_close_gives_the_place_back(start_proxy, ws_upstream):
    """`limits.maxTunnelsPerClient` counts one client's tunnels across the process: with two workers
    its connections land on both loops, and past the cap each is refused 503 `too_many_tunnels`.
    A refused upgrade, an unreachable upstream, the idle timeout and a close from either side give
    the place back."""
    routes = ws_routes(ws_upstream.port, credential="none") + [
        {"name": "dead", "path": "/dead", "upstream": f"http://127.0.0.1:{free_port()}"},
        {"name": "idle", "path": "/idle", "upstream": f"http://127.0.0.1:{ws_upstream.port}/idle",
         "tunnelIdleTimeoutSeconds": 1}]
    proxy = plain_proxy(start_proxy, routes, workers=2, limits={"maxTunnelsPerClient": 3})

    async def refusal(path):
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(proxy.port, path), ping_interval=None)
        return refused.value.response

    async def admitted(path):
        deadline = time.monotonic() + 5
        while True:
            try:
                return await connect(ws_url(proxy.port, path), ping_interval=None)
            except InvalidStatus as refused:
                assert refused.response.status_code == 503 and time.monotonic() < deadline, "no place came back"
                await asyncio.sleep(0.1)

    async def scenario():
        for _ in range(4):
            assert (await refusal("/ws/refuse")).status_code == 403
            assert (await refusal("/dead/x")).status_code == 502
        idle = [await admitted(f"/idle/{i}") for i in range(3)]
        assert (await refusal("/open/over-idle")).status_code == 503
        for ws in idle:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        tunnels = [await admitted(f"/open/{i}") for i in range(3)]
        for attempt in range(8):
            response = await refusal(f"/open/over{attempt}")
            assert response.status_code == 503, (attempt, response.status_code)
            assert json.loads(response.body)["error"] == "too_many_tunnels"
        await tunnels[0].close()
        await tunnels[1].send("server-close")
        with pytest.raises(ConnectionClosed):
            await tunnels[1].recv()
        tunnels[:2] = [await admitted("/open/again0"), await admitted("/open/again1")]
        for ws in tunnels:
            await ws.send("in")
            assert await ws.recv() == "in"
        assert (await refusal("/open/over-again")).status_code == 503
        await asyncio.gather(*(ws.close() for ws in tunnels))

    run(scenario())
    started = [e for e in proxy.log_events("started")]
    assert started and started[-1]["workers"] == 2


def test_an_upstream_that_never_answers_the_handshake_times_out(start_proxy):
    silent = socket.create_server(("127.0.0.1", 0))
    held = []
    heard = []

    def hold():
        conn, _ = silent.accept()
        held.append(conn)
        heard.append(conn.recv(65536))  # the handshake, never answered

    threading.Thread(target=hold, daemon=True).start()
    try:
        proxy = plain_proxy(start_proxy, [{"name": "silent", "path": "/silent",
                                           "upstream": f"http://127.0.0.1:{silent.getsockname()[1]}", "timeoutSeconds": 1}])

        async def scenario():
            started = time.monotonic()
            with pytest.raises(InvalidStatus) as refused:
                await connect(ws_url(proxy.port, "/silent/x"), ping_interval=None, open_timeout=10)
            return refused.value.response, time.monotonic() - started

        response, took = run(scenario())
        assert response.status_code == 504 and b"upstream_timeout" in response.body
        assert took < 5
        # What timed out was the upgrade handshake (not a request stripped of its Upgrade).
        assert heard and b"\r\nUpgrade: websocket\r\n" in heard[0], heard
    finally:
        silent.close()


class RawUpgradeUpstream(ThreadedRawServer):
    """Answers an `Upgrade: my-proto` request with 101 and then echoes bytes upper-cased; any
    other request with 200 naming the Upgrade field it saw (or none)."""

    def _serve(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            fields = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip()
                      for line in head.split(b"\r\n")[1:] if b":" in line}
            if fields.get(b"upgrade") == b"my-proto":
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: my-proto\r\n\r\n")
                if rest:
                    conn.sendall(rest.upper())
                while chunk := conn.recv(4096):
                    conn.sendall(chunk.upper())
            else:
                body = b"upgrade=" + fields.get(b"upgrade", b"none")
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def close(self):
        self.sock.close()


class TricklingWebSocket(ThreadedRawServer):
    """A WebSocket server written by hand: after the handshake it sends one binary message of
    `size` bytes as a single frame, in `pieces` writes `gap` seconds apart (so a goodbye can come
    while the frame is under way), then reads until the peer closes."""

    def __init__(self, size: int, pieces: int, gap: float):
        self.payload = bytes(i % 251 for i in range(size))
        self.pieces = pieces
        self.gap = gap
        self.started = threading.Event()
        super().__init__()

    def _serve(self, conn):
        import base64
        import hashlib
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            key = next(line.split(b":", 1)[1].strip() for line in data.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            frame = b"\x82\x7f" + len(self.payload).to_bytes(8, "big") + self.payload
            step = -(-len(frame) // self.pieces)
            try:
                for start in range(0, len(frame), step):
                    if start:
                        time.sleep(self.gap)
                    conn.sendall(frame[start:start + step])
                    self.started.set()
                while conn.recv(4096):
                    pass
            except OSError:
                pass

    def close(self):
        self.sock.close()


async def receive_until_closed(ws) -> tuple[list, object]:
    """Every message until the connection closes, and the ConnectionClosed that ended it."""
    received = []
    while True:
        try:
            received.append(await asyncio.wait_for(ws.recv(), 15))
        except ConnectionClosed as closed:
            return received, closed


def test_a_logout_goodbye_waits_for_the_end_of_the_frame_the_upstream_is_sending(start_proxy, idp_factory,  # noqa: F811
                                                                                  tmp_path):
    """The 1001 close frame of a logout never lands inside a message the upstream is streaming to
    the client: the proxy lets the frame under way finish, then says goodbye, so the client sees the
    whole message and a clean 1001 (a close frame inside the payload would corrupt it)."""
    upstream = TricklingWebSocket(size=2 << 20, pieces=16, gap=0.1)
    try:
        proxy = demo_proxy(start_proxy, idp_factory, tmp_path, [
            {"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}", "credential": "access_token"}])

        async def scenario():
            async with connect(ws_url(proxy.port, "/ws/big"), max_size=None, ping_interval=None,
                               compression=None) as ws:
                assert await asyncio.to_thread(upstream.started.wait, 5)
                await asyncio.sleep(0.3)
                await asyncio.to_thread(post, proxy.port, "/_platform/logout")
                return await receive_until_closed(ws)

        received, closed = run(scenario())
        assert closed.rcvd is not None and closed.rcvd.code == 1001, repr(closed)
        assert len(received) == 1 and received[0] == upstream.payload
        wait_until(lambda: any(e.get("reason") == "logout" for e in proxy.server.log_events("tunnel_closed")),
                   timeout=5, what="tunnel_closed reason=logout")
    finally:
        upstream.close()


def test_sigterm_lets_a_frame_finish_within_the_shutdown_grace(start_proxy):
    """SIGTERM gives each tunnel `shutdownGraceSeconds` to say goodbye: a frame the upstream takes
    longer than 5 s to finish still reaches the client whole, then a 1001, then the proxy exits 0."""
    upstream = TricklingWebSocket(size=1 << 20, pieces=14, gap=0.5)
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}],
                            shutdownGraceSeconds=9)

        async def scenario():
            async with connect(ws_url(proxy.port, "/ws/slow"), max_size=None, ping_interval=None,
                               compression=None) as ws:
                assert await asyncio.to_thread(upstream.started.wait, 5)
                started = time.monotonic()
                proxy.signal(signal.SIGTERM)
                received, closed = await receive_until_closed(ws)
                return received, closed, time.monotonic() - started

        received, closed, took = run(scenario())
        assert closed.rcvd is not None and closed.rcvd.code == 1001, repr(closed)
        assert len(received) == 1 and received[0] == upstream.payload
        assert took > 5, took
        assert proxy.wait(timeout=15) == 0
    finally:
        upstream.close()


def test_a_frame_that_never_ends_gets_no_close_frame_inside_it(start_proxy):
    """An upstream stalled in the middle of a frame when the tunnel ends (SIGTERM, a 1 s grace):
    the client's connection closes with nothing after the bytes of that frame, never a close frame
    inside its payload. Read from a raw socket, to see the exact bytes."""
    upstream = TricklingWebSocket(size=1 << 20, pieces=4, gap=60)
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}],
                            shutdownGraceSeconds=1)
        frame = b"\x82\x7f" + len(upstream.payload).to_bytes(8, "big") + upstream.payload
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(b"GET /ws/stalled HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            received = b""
            while b"\r\n\r\n" not in received:
                received += s.recv(65536)
            assert received.startswith(b"HTTP/1.1 101")
            assert upstream.started.wait(5)
            head, _, body = received.partition(b"\r\n\r\n")
            while len(body) < len(frame) // 4:
                body += s.recv(65536)
            started = time.monotonic()
            proxy.signal(signal.SIGTERM)
            while chunk := s.recv(65536):
                body += chunk
            took = time.monotonic() - started
        assert len(body) < len(frame) and body == frame[:len(body)], "bytes the upstream did not send reached the client"
        assert took < 5, took
        assert proxy.wait(timeout=10) == 0
    finally:
        upstream.close()


def test_another_upgrade_is_tunnelled_only_where_the_route_opts_in(start_proxy):
    upstream = RawUpgradeUpstream()
    try:
        proxy = plain_proxy(start_proxy, [
            {"name": "opted", "path": "/opted", "upstream": f"http://127.0.0.1:{upstream.port}", "upgrades": ["my-proto"]},
            {"name": "plain", "path": "/plain", "upstream": f"http://127.0.0.1:{upstream.port}"},
        ])
        request = b"GET /%s/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: my-proto\r\n\r\n"
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            s.sendall(request % b"opted")
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += s.recv(4096)
            assert answer.startswith(b"HTTP/1.1 101")
            s.sendall(b"hello tunnel")
            echoed = answer.partition(b"\r\n\r\n")[2]
            while len(echoed) < len(b"hello tunnel"):
                echoed += s.recv(4096)
            assert echoed == b"HELLO TUNNEL"
        # Not opted in: the Upgrade field is dropped and the request forwarded as usual.
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            s.sendall(request % b"plain")
            answer = b""
            while not answer.endswith(b"upgrade=none"):
                chunk = s.recv(4096)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
    finally:
        upstream.close()


def test_a_refused_upgrade_that_echoes_the_handshake_has_the_token_masked(start_proxy, idp_factory, tmp_path):  # noqa: F811
    """An upstream that refuses the upgrade and quotes the handshake it got (as many error pages
    do) never shows the client the route's token: the refusal is masked like any response."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def serve_one():
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            authorization = [line for line in head.split(b"\r\n") if line.lower().startswith(b"authorization:")]
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nX-Echo: " + (authorization or [b"none"])[0][:200]
                         + b"\r\nContent-Type: text/plain\r\nContent-Length: " + str(len(head)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + head)

    server = threading.Thread(target=serve_one, daemon=True)
    server.start()
    try:
        proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(port))

        async def scenario():
            with pytest.raises(InvalidStatus) as refused:
                await connect(ws_url(proxy.port, "/ws/echo"), ping_interval=None)
            return refused.value.response

        response = run(scenario())
        assert response.status_code == 400
        assert b"Authorization" in response.body, "the upstream's echo reached the client"
        assert TOKEN.encode() not in response.body
        assert all(TOKEN not in value for _, value in response.headers.raw_items())
    finally:
        server.join(timeout=5)
        listener.close()


def test_an_upgrade_asked_for_with_a_body_is_forwarded_as_a_plain_request(start_proxy, main_upstream):
    """A request with a body that also asks for an upgrade is answered: it is forwarded as a plain
    request (Upgrade dropped as a hop-by-hop field), not handed to a tunnel that cannot carry it."""
    proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": main_upstream.url("/ws")}])
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request("POST", "/ws/upload", body=b"hello", headers={
            "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Content-Type": "text/plain"})
        response = conn.getresponse()
        assert response.status == 200
        response.read()
    finally:
        conn.close()
    seen = main_upstream.records[-1]
    assert seen.method == "POST" and seen.body_length == 5 and seen.complete
    assert "upgrade" not in {name.lower() for name, _ in seen.headers}


def test_an_upgrade_on_a_route_in_mock_mode_is_refused_and_a_mock_only_route_serves_its_mock(
        start_proxy, ws_upstream, tmp_path):
    """A route with an upstream switched to mock replay cannot carry a tunnel: 400
    upgrade_not_allowed, and nothing reaches the upstream. A mock-only route has nothing to tunnel
    to: it ignores Upgrade and serves its mock."""
    from proxy import write_mock_dir
    mocks = write_mock_dir(tmp_path / "mocks", {"hello": {"mocked": True}})
    proxy = plain_proxy(start_proxy, [
        {"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{ws_upstream.port}/ws",
         "mock": {"directory": str(mocks), "mode": "replay"}},
        {"name": "fixtures", "path": "/fixtures/", "mock": {"directory": str(mocks), "mode": "replay"}},
    ])
    before = len(ws_upstream.handshakes)
    for path, status in (("/ws/hello", 400), ("/fixtures/hello", 200)):
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        try:
            conn.request("GET", path, headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                               "Sec-WebSocket-Version": "13",
                                               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
            response = conn.getresponse()
            body = json.loads(response.read())
        finally:
            conn.close()
        assert response.status == status, (path, response.status, body)
        if status == 400:
            assert body["error"] == "upgrade_not_allowed"
        else:
            assert body == {"mocked": True}
    assert len(ws_upstream.handshakes) == before


def websocket_accept(head: bytes) -> bytes:
    """The `Sec-WebSocket-Accept` value answering the handshake `head` (RFC 6455 §4.2.2)."""
    import base64
    import hashlib
    key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key:"))
    return base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())


def process_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_upstream_that_resets_while_the_client_is_not_reading_costs_no_cpu(start_proxy):
    """An upstream that fills the queue toward a client that does not read, then resets its
    connection: the kernel reports the hang-up whatever the tunnel's interest, so a side that is
    not read must stop being watched, or the loop spins at full CPU until the idle timeout. The
    client still gets what was queued, then the close, and the tunnel's place comes back."""
    reset = threading.Event()

    class FloodThenReset(ThreadedRawServer):
        def _serve(self, conn):
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + websocket_accept(head) + b"\r\n\r\n")
            conn.settimeout(0.5)
            frame = b"\x82\x7e" + (60000).to_bytes(2, "big") + bytes(60000)
            try:
                while True:
                    conn.sendall(frame)
            except (socket.timeout, OSError):
                pass
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, "little") + (0).to_bytes(4, "little"))
            conn.close()
            reset.set()

    upstream = FloodThenReset()
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}])
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", proxy.port))
        with client:
            client.sendall(b"GET /ws/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            received = client.recv(4096)
            assert received.startswith(b"HTTP/1.1 101"), received
            assert reset.wait(10), "the upstream never filled the tunnel"
            time.sleep(0.2)
            before = process_cpu_seconds(proxy.pid)
            time.sleep(2)
            spent = process_cpu_seconds(proxy.pid) - before
            assert spent < 0.5, f"the proxy spent {spent:.2f} s of CPU in 2 s on a tunnel whose upstream reset"
            client.settimeout(10)
            while chunk := client.recv(65536):
                received += chunk
        assert len(received) > TUNNEL_QUEUE_CAP, len(received)
        wait_until(lambda: 'platform_proxy_tunnels_open{route="ws"} 0' in metrics_text(proxy.port), timeout=5,
                   what="the tunnel closed")
    finally:
        upstream.sock.close()



def test_a_handshake_field_with_an_empty_value_reaches_the_upstream_as_a_field(start_proxy, ws_upstream):
    """A client field with an empty value (`X-Trace:`) is kept by the header policy in libcurl's
    `Name;` form; the tunnel writes its handshake itself, so that form must become `Name:` there,
    or the upstream reads a malformed head and refuses the upgrade."""
    proxy = plain_proxy(start_proxy, ws_routes(ws_upstream.port, credential="none"))
    request = (b"GET /open/empty HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               b"X-Trace:\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
        client.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = client.recv(4096)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    assert ws_upstream.handshakes[-1].get("x-trace") == ""


def test_an_interim_answer_before_the_101_is_not_relayed_as_the_answer(start_proxy):
    """An upstream may send 1xx heads (`103 Early Hints`) before its answer: the tunnel opens on
    the 101 that follows, instead of relaying the 1xx as a final answer (the client would wait for
    another) and losing the 101."""

    class EarlyHints(ThreadedRawServer):
        def _serve(self, conn):
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
                time.sleep(0.2)
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + websocket_accept(head) + b"\r\n\r\n\x81\x05hello")
                if conn.recv(4096):  # the client's close frame: answered, then the end
                    conn.sendall(b"\x88\x02\x03\xe8")

    upstream = EarlyHints()
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}])

        async def scenario():
            async with connect(ws_url(proxy.port, "/ws/hints"), ping_interval=None, open_timeout=5) as ws:
                return await asyncio.wait_for(ws.recv(), 5)

        assert run(scenario()) == "hello"
    finally:
        upstream.sock.close()


class ChoosyUpgradeUpstream(ThreadedRawServer):
    """Records each request's `Upgrade` field; switches to `my-proto` when it is offered, else to
    the first protocol offered (101, then silence until the peer closes); 200 without one."""

    def __init__(self):
        self.heard: list[bytes | None] = []
        super().__init__()

    def _serve(self, conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            offered = next((line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")[1:]
                            if line.lower().startswith(b"upgrade:")), None)
            self.heard.append(offered)
            if offered is None:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nupgrade=none")
                return
            protocols = [p.strip() for p in offered.split(b",")]
            chosen = b"my-proto" if b"my-proto" in protocols else protocols[0]
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + chosen + b"\r\n\r\n")
            while conn.recv(4096):
                pass


@pytest.mark.parametrize("fields", [
    b"Connection: Upgrade\r\nUpgrade: websocket, my-proto\r\n",
    b"Connection: keep-alive\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n",
], ids=["a-list-of-protocols", "upgrade-in-a-second-connection-field"])
def test_the_upstream_is_offered_only_the_protocol_the_route_tunnels(start_proxy, fields):
    """The route decides on the first protocol of `Upgrade` (RFC 9110 §7.8 lists them by
    preference); only that one is offered upstream, so an upstream cannot switch the tunnel to a
    protocol the route's `upgrades` does not list. `upgrade` is found in any `Connection` field
    (several fields are one list, RFC 9110 §5.3), as the header policy reads them."""
    upstream = ChoosyUpgradeUpstream()
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}])
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
            client.sendall(b"GET /ws/choose HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = client.recv(4096)
                assert chunk, answer
                answer += chunk
        assert upstream.heard == [b"websocket"], upstream.heard
        assert answer.startswith(b"HTTP/1.1 101") and b"\r\nUpgrade: websocket\r\n" in answer, answer
    finally:
        upstream.sock.close()


def test_an_upgrade_asked_for_in_http_1_0_is_forwarded_as_a_plain_request(start_proxy):
    """RFC 9110 §7.8 has a server ignore `Upgrade` in an HTTP/1.0 request: it is dropped as a
    hop-by-hop field and the request forwarded as usual, not tunnelled."""
    upstream = RawUpgradeUpstream()
    try:
        proxy = plain_proxy(start_proxy, [
            {"name": "opted", "path": "/opted", "upstream": f"http://127.0.0.1:{upstream.port}", "upgrades": ["my-proto"]}])
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            s.sendall(b"GET /opted/x HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: my-proto\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"upgrade=none"), answer
    finally:
        upstream.close()


def test_the_console_lists_a_handshake_as_sent_with_the_routes_credentials(start_proxy, idp_factory, tmp_path,  # noqa: F811
                                                                            ws_upstream):
    """The console's request list says how each exchange went upstream: a handshake the upstream
    answered (101, or a refusal relayed) carried the route's token to that upstream, so it reads
    `injected` with the upstream's origin, not `gated` (never forwarded) with none."""
    proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(ws_upstream.port))

    async def scenario():
        async with connect(ws_url(proxy.port, "/ws/chat"), ping_interval=None) as ws:
            await ws.send("x")
            assert await ws.recv() == "x"
        with pytest.raises(InvalidStatus):
            await connect(ws_url(proxy.port, "/ws/refuse"), ping_interval=None)
        async with connect(ws_url(proxy.port, "/open/chat"), ping_interval=None):
            pass

    run(scenario())
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    try:
        conn.request("GET", "/_platform/console/requests")
        records = {r["path"]: r for r in json.loads(conn.getresponse().read())["requests"]}
    finally:
        conn.close()
    origin = f"http://127.0.0.1:{ws_upstream.port}"
    seen = {path: (records[path]["status"], records[path]["credentials"], records[path]["upstream"])
            for path in ("/ws/chat", "/ws/refuse", "/open/chat")}
    assert seen == {"/ws/chat": (101, "injected", origin), "/ws/refuse": (403, "injected", origin),
                    "/open/chat": (101, "no_provider", origin)}, seen


def test_a_client_that_resets_while_the_upstream_is_not_reading_costs_no_cpu(start_proxy):
    """The other way round: a client fills the queue toward an upstream that does not read, then
    resets its connection. The client side is no longer watched and the tunnel ends once the
    upstream takes what was queued (or the drain's time runs out), without a spinning loop."""
    release = threading.Event()
    taken = []

    class Deaf(ThreadedRawServer):
        def _serve(self, conn):
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + websocket_accept(head) + b"\r\n\r\n")
                release.wait(30)
                conn.settimeout(10)
                try:
                    while chunk := conn.recv(65536):
                        taken.append(len(chunk))
                except OSError:
                    pass

    upstream = Deaf()
    try:
        proxy = plain_proxy(start_proxy, [{"name": "ws", "path": "/ws", "upstream": f"http://127.0.0.1:{upstream.port}"}])
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(b"GET /ws/deaf HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                       b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        assert client.recv(4096).startswith(b"HTTP/1.1 101")
        frame = b"\x82\xfe" + (60000).to_bytes(2, "big") + b"mask" + bytes(60000)
        client.settimeout(0.5)
        try:
            while True:
                client.sendall(frame)
        except socket.timeout:
            pass
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, "little") + (0).to_bytes(4, "little"))
        client.close()
        time.sleep(0.2)
        before = process_cpu_seconds(proxy.pid)
        time.sleep(2)
        spent = process_cpu_seconds(proxy.pid) - before
        release.set()
        assert spent < 0.5, f"the proxy spent {spent:.2f} s of CPU in 2 s on a tunnel whose client reset"
        wait_until(lambda: 'platform_proxy_tunnels_open{route="ws"} 0' in metrics_text(proxy.port), timeout=10,
                   what="the tunnel closed")
    finally:
        release.set()
        upstream.sock.close()


def test_a_route_listing_a_protocol_with_a_version_tunnels_it(start_proxy):
    """`upgrades` names are matched as a request's protocol is, without the version after `/`
    (docs/websockets.md): a route listing `my-proto/2` tunnels `Upgrade: my-proto/2`, where it
    once kept the version and never matched, dropping every such upgrade."""
    upstream = RawUpgradeUpstream()
    try:
        proxy = plain_proxy(start_proxy, [
            {"name": "v", "path": "/v", "upstream": f"http://127.0.0.1:{upstream.port}", "upgrades": ["My-Proto/2"]}])
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            s.sendall(b"GET /v/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: my-proto\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = s.recv(4096)
                assert chunk, answer
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 101"), answer
    finally:
        upstream.close()


def test_a_101_that_echoes_the_handshake_has_the_token_masked(start_proxy, idp_factory, tmp_path):  # noqa: F811
    """The 101 is a response like any other: an upstream that quotes the route's token in its head
    (a value, or a field name, re-cased) never shows it to the client; frames are not masked."""

    class EchoingSwitch(ThreadedRawServer):
        def _serve(self, conn):
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                authorization = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                                     if line.lower().startswith(b"authorization:"))
                token = authorization.split(b" ", 1)[1]
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + websocket_accept(head) + b"\r\nX-Echo: " + authorization
                             + b"\r\nX-Seen-" + token.upper() + b": 1\r\n\r\n\x81\x02hi")
                while conn.recv(4096):
                    pass

    upstream = EchoingSwitch()
    try:
        proxy = demo_proxy(start_proxy, idp_factory, tmp_path, ws_routes(upstream.port))
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
            client.sendall(b"GET /ws/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            answer = b""
            while not answer.endswith(b"\x81\x02hi"):
                chunk = client.recv(4096)
                assert chunk, answer
                answer += chunk
        head = answer.partition(b"\r\n\r\n")[0]
        assert head.startswith(b"HTTP/1.1 101") and b"\r\nX-Echo: Bearer " + b"*" * len(TOKEN) in head, head
        assert TOKEN.lower().encode() not in head.lower(), head
    finally:
        upstream.sock.close()
