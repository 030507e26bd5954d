"""Local security (docs/security.md), end to end against the real binary on loopback:
the Host allow-list (DNS rebinding), the Origin check (cross-site requests
from a browser), the optional ``apiKey`` (``X-Proxy-Key``), the Unix socket
listener's file mode, and the refusal of TRACE/TRACK.

Assertions are made on what the client got back and on what the recording
upstream saw (a refused request must never reach it).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import time

import pytest

from proxy import ProxyProcess, ResponseReader, base_config, build_request, read_head, write_mock_dir
from test_forwarding import assert_error_json, make_tokens, static_provider
from upstream import Upstream

PROXY_KEY = "pk-" + os.urandom(12).hex()


def path_id(value) -> str:
    """Test ids become temp-dir names in the harness: no slashes."""
    return str(value).strip("/").replace("/", "_") or "root"


# --------------------------------------------------------------------------- fixtures and helpers


def security_routes(upstream: Upstream, mock_dir) -> list[dict]:
    base = upstream.url("/base/")
    return [
        {"name": "api", "path": "/api/", "upstream": base, "credential": "access_token", "timeoutSeconds": 10},
        {"name": "jwt", "path": "/jwt/", "upstream": base, "credential": "jwt", "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": base, "credential": "none", "timeoutSeconds": 10},
        {"name": "m", "path": "/m/", "mock": {"directory": str(mock_dir), "mode": "replay"}},
    ]


@pytest.fixture
def make_secure(start_proxy, main_upstream, tmp_path):
    """Factory: a proxy with a credentialed, a none and a mock route (``overrides`` are top-level keys)."""

    def _make(**overrides):
        tokens = make_tokens(tmp_path / "tokens")
        mock_dir = write_mock_dir(tmp_path / "mock", {"a": {"mock": "a"}, "index": {"mock": "index"}})
        cfg = base_config(None, provider=static_provider(tokens),
                          routes=security_routes(main_upstream, mock_dir), **overrides)
        server = start_proxy(config=cfg, name="sec")
        server.upstream = main_upstream
        server.tokens = tokens
        return server

    return _make


@pytest.fixture
def secure(make_secure):
    return make_secure()


def with_host(server, host: str) -> str:
    """``host`` with the proxy's real port appended (the port must not matter)."""
    return f"{host}:{server.port}"


def raw_get(server, target: str, headers: dict, timeout: float = 5.0):
    """One raw request with exactly these headers (Connection: close added)."""
    hdrs = dict(headers)
    hdrs.setdefault("Connection", "close")
    ex = server.exchange(build_request("GET", target, hdrs), timeout=timeout)
    assert ex.final is not None, f"GET {target} {headers}: {ex.outcome} {ex.data[:300]!r}"
    return ex.final


# --------------------------------------------------------------------------- Host allow-list


@pytest.mark.parametrize("host", [
    "127.0.0.1", "localhost", "[::1]",
    "LOCALHOST", "LocalHost",          # case-insensitive
])
@pytest.mark.parametrize("with_port", [True, False])
def test_default_allowed_hosts_are_served_with_or_without_a_port(secure, host, with_port):
    value = with_host(secure, host) if with_port else host
    r = secure.get("/_platform/health", headers={"Host": value})
    assert r.status == 200, f"Host: {value}\n{r}"
    r = secure.get("/api/echo", headers={"Host": value})
    assert r.status == 200, f"Host: {value}\n{r}"


@pytest.mark.parametrize("host", [
    "evil.example",
    "evil.example:8080",
    "127.0.0.2",
    "0.0.0.0",
    "localhost.evil.example",
    "127.0.0.1.nip.io",
    "evil-localhost",
    "[::2]",
    "192.168.1.10",
])
def test_foreign_host_header_gets_403_host_not_allowed_and_never_reaches_upstream(secure, host):
    for path in ("/api/echo", "/open/echo", "/m/a", "/_platform/metrics", "/nowhere"):
        r = secure.get(path, headers={"Host": host})
        assert_error_json(r, 403, "host_not_allowed")
    time.sleep(0.1)
    assert not secure.upstream.records, f"Host {host!r} reached the upstream:\n{secure.upstream.dump()}"


def test_foreign_host_is_refused_with_the_proxys_own_port_too(secure):
    # DNS rebinding: the browser sends the attacker's name with the port it connected to.
    r = secure.get("/api/echo", headers={"Host": with_host(secure, "rebind.attacker.example")})
    assert_error_json(r, 403, "host_not_allowed")
    assert not secure.upstream.records


def test_configured_allowed_hosts_replace_the_defaults(make_secure):
    server = make_secure(allowedHosts=["proxy.internal", "[::1]"])
    r = server.get("/api/echo", headers={"Host": with_host(server, "proxy.internal")})
    assert r.status == 200, str(r)
    r = server.get("/api/echo", headers={"Host": "PROXY.Internal"})
    assert r.status == 200, str(r)
    for refused in ("localhost", "127.0.0.1", with_host(server, "127.0.0.1")):
        r = server.get("/api/echo", headers={"Host": refused})
        assert_error_json(r, 403, "host_not_allowed")


def test_absolute_form_target_naming_another_host_than_host_gets_400_host_mismatch(secure):
    r = raw_get(secure, "http://evil.example/api/echo", {"Host": secure.host_header})
    assert_error_json(r, 400, "host_mismatch")
    r = raw_get(secure, f"http://localhost:{secure.port}/api/echo", {"Host": secure.host_header})
    assert_error_json(r, 400, "host_mismatch")
    time.sleep(0.1)
    assert not secure.upstream.records, secure.upstream.dump()


def test_absolute_form_target_agreeing_with_an_allowed_host_is_served(secure):
    r = raw_get(secure, f"http://{secure.host_header}/api/echo", {"Host": secure.host_header})
    assert r.status == 200, str(r)
    assert len(secure.upstream.records) == 1


def test_absolute_form_target_and_host_agreeing_on_a_foreign_host_get_403(secure):
    r = raw_get(secure, "http://evil.example/api/echo", {"Host": "evil.example"})
    assert_error_json(r, 403, "host_not_allowed")
    assert not secure.upstream.records


# --------------------------------------------------------------------------- Origin


FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example:443",
    "http://127.0.0.2:8080",
    "http://localhost.evil.example",
    "null",                            # sandboxed iframes, file:// pages: never allowed
    "file://",
    "ftp://localhost",                 # only http and https name an allowed origin
    "chrome-extension://localhost",
    "garbage",
    "",
]

ALLOWED_ORIGINS = [
    "http://localhost",
    "http://localhost:3000",
    "https://127.0.0.1",
    "https://127.0.0.1:8443",
    "http://[::1]:5173",
    "HTTP://LOCALHOST:3000",
]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS, ids=path_id)
@pytest.mark.parametrize("path", ["/api/echo", "/jwt/echo"], ids=path_id)
def test_foreign_origin_on_credentialed_route_gets_403_origin_not_allowed(secure, origin, path):
    r = secure.get(path, headers={"Origin": origin})
    assert_error_json(r, 403, "origin_not_allowed")
    time.sleep(0.05)
    assert not secure.upstream.records, f"Origin {origin!r} reached the upstream:\n{secure.upstream.dump()}"


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.2"], ids=path_id)
@pytest.mark.parametrize("method,path", [
    ("GET", "/_platform/metrics"),
    ("POST", "/_platform/mock"),
    ("GET", "/_platform/no-such-endpoint"),
], ids=path_id)
def test_foreign_origin_on_every_platform_endpoint_gets_403(secure, origin, method, path):
    body = b'{"route":"m","mode":"replay"}' if method == "POST" else b""
    r = secure.request(method, path, headers={"Origin": origin}, body=body)
    assert_error_json(r, 403, "origin_not_allowed")


@pytest.mark.parametrize("origin", ALLOWED_ORIGINS, ids=path_id)
def test_allowed_origin_is_served_on_credentialed_routes_and_platform_endpoints(secure, origin):
    r = secure.get("/api/echo", headers={"Origin": origin})
    assert r.status == 200, f"Origin {origin!r}:\n{r}"
    assert secure.upstream.records[-1].header("Authorization") == f"Bearer {secure.tokens.access}"
    r = secure.get("/_platform/health", headers={"Origin": origin})
    assert r.status == 200, f"Origin {origin!r}:\n{r}"


@pytest.mark.parametrize("origin", ["http://evil.example", "null"], ids=path_id)
def test_foreign_origin_is_allowed_on_none_routes_and_credential_free_mocks(secure, origin):
    r = secure.get("/open/echo", headers={"Origin": origin})
    assert r.status == 200, f"Origin {origin!r} on a none route:\n{r}"
    rec = secure.upstream.records[-1]
    assert rec.header("Origin") == origin, str(rec)
    assert "authorization" not in rec.header_names(), str(rec)
    r = secure.get("/m/a", headers={"Origin": origin})
    assert r.status == 200 and r.json() == {"mock": "a"}, f"Origin {origin!r} on a mock route:\n{r}"


def test_origin_allowed_list_follows_configured_allowed_hosts(make_secure):
    server = make_secure(allowedHosts=["app.local", "127.0.0.1"])
    r = server.get("/api/echo", headers={"Origin": "http://app.local:3000"})
    assert r.status == 200, str(r)
    r = server.get("/api/echo", headers={"Origin": "http://localhost:3000"})
    assert_error_json(r, 403, "origin_not_allowed")


# --------------------------------------------------------------------------- apiKey


@pytest.fixture(params=["literal", "env", "file"])
def keyed(request, make_secure, monkeypatch, tmp_path):
    """A proxy whose apiKey is PROXY_KEY, given as each kind of secret source."""
    if request.param == "literal":
        source = PROXY_KEY
    elif request.param == "env":
        monkeypatch.setenv("PLATFORM_PROXY_TEST_API_KEY", PROXY_KEY)
        source = {"env": "PLATFORM_PROXY_TEST_API_KEY"}
    else:
        path = tmp_path / "proxy-key.txt"
        path.write_text(PROXY_KEY + "\n")  # trailing newline is trimmed
        source = {"file": str(path)}
    return make_secure(apiKey=source)


KEY_PATHS = [
    ("GET", "/_platform/metrics"),
    ("POST", "/_platform/mock"),
    ("GET", "/api/echo"),
    ("GET", "/open/echo"),
    ("GET", "/m/a"),
    ("GET", "/nowhere"),
]


@pytest.mark.parametrize("method,path", KEY_PATHS, ids=path_id)
def test_api_key_missing_gets_401_proxy_key_required_everywhere(keyed, method, path):
    body = b'{"route":"m","mode":"replay"}' if method == "POST" else b""
    r = keyed.request(method, path, body=body)
    assert_error_json(r, 401, "proxy_key_required")
    time.sleep(0.05)
    assert not keyed.upstream.records, keyed.upstream.dump()


@pytest.mark.parametrize("wrong", [
    "",
    "wrong",
    PROXY_KEY[:-1],            # a prefix
    PROXY_KEY + "x",           # longer
    PROXY_KEY.upper(),         # case matters
    " " + PROXY_KEY + "x",
])
def test_wrong_api_key_gets_401(keyed, wrong):
    for path in ("/_platform/metrics", "/api/echo"):
        r = keyed.get(path, headers={"X-Proxy-Key": wrong})
        assert_error_json(r, 401, "proxy_key_required")
    assert not keyed.upstream.records, keyed.upstream.dump()


@pytest.mark.parametrize("method,path", KEY_PATHS[:-1], ids=path_id)
def test_correct_api_key_is_served(keyed, method, path):
    body = b'{"route":"m","mode":"replay"}' if method == "POST" else b""
    r = keyed.request(method, path, headers={"X-Proxy-Key": PROXY_KEY}, body=body)
    assert r.status == 200, f"{method} {path}:\n{r}"


def test_api_key_is_never_forwarded_upstream(keyed):
    for path in ("/api/echo", "/open/echo"):
        r = keyed.get(path, headers={"X-Proxy-Key": PROXY_KEY})
        assert r.status == 200, str(r)
        rec = keyed.upstream.records[-1]
        assert "x-proxy-key" not in rec.header_names(), f"X-Proxy-Key forwarded on {path}:\n{rec}"
        assert PROXY_KEY not in str(rec.headers) and PROXY_KEY not in rec.target, str(rec)
        assert PROXY_KEY.encode() not in r.body, f"the key came back in the response body:\n{r}"


def test_without_api_key_no_proxy_key_is_needed(secure):
    assert secure.get("/_platform/health").status == 200
    assert secure.get("/api/echo").status == 200


@pytest.mark.parametrize("path", ["/_platform/health", "/_platform/ready"], ids=path_id)
def test_probes_answer_without_the_key_from_any_host_and_reveal_nothing_else(keyed, path):
    """Container HEALTHCHECKs and kubelet probes carry no key and name the pod IP as Host."""
    for headers in ({}, {"Host": "10.1.2.3:8080"}, {"Host": "evil.example", "X-Proxy-Key": "wrong"},
                    {"Origin": "http://evil.example"}):
        r = keyed.get(path, headers=headers)
        assert r.status == 200, f"{path} with {headers}:\n{r}"
        assert r.json() in ({"status": "ok"}, {"status": "ready"}), r
    assert_error_json(keyed.get("/_platform/metrics", headers={"Host": "10.1.2.3:8080"}), 403, "host_not_allowed")
    assert_error_json(keyed.get("/_platform/metrics"), 401, "proxy_key_required")
    assert not keyed.upstream.records, keyed.upstream.dump()


def test_host_check_still_applies_with_a_correct_api_key(keyed):
    r = keyed.get("/api/echo", headers={"Host": "evil.example", "X-Proxy-Key": PROXY_KEY})
    assert_error_json(r, 403, "host_not_allowed")
    assert not keyed.upstream.records


# --------------------------------------------------------------------------- Unix socket


@pytest.fixture
def short_dir():
    # sun_path is 108 bytes: pytest's tmp_path can be too long for a socket path.
    d = tempfile.mkdtemp(prefix="pp-sock-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def unix_request(path: str, method: str, target: str, headers: dict, body: bytes = b"", timeout: float = 5.0):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        hdrs = {"Connection": "close"}
        if body or method == "POST":
            hdrs["Content-Length"] = str(len(body))
        hdrs.update(headers)
        s.sendall(build_request(method, target, hdrs, body))
        return ResponseReader(s, timeout=timeout).read_response(method=method)


@pytest.fixture
def unix_proxy(main_upstream, tmp_path, short_dir):
    """Started by hand (not start_proxy) so a listener that fails to start is one clear error."""
    sock_path = os.path.join(short_dir, "proxy.sock")
    tokens = make_tokens(tmp_path / "tokens")
    mock_dir = write_mock_dir(tmp_path / "mock", {"a": {"mock": "a"}})
    cfg = base_config(None, provider=static_provider(tokens), routes=security_routes(main_upstream, mock_dir))
    cfg["listen"] = ["127.0.0.1:0", f"unix:{sock_path}"]
    server = ProxyProcess(cfg, tmp_path / "unix-proxy", "unix")
    try:
        server.start()
    except RuntimeError as e:
        server.kill()
        pytest.fail(f"the proxy did not start with listen {cfg['listen']}:\n{e}", pytrace=False)
    # keep the TCP address first for the harness's host/port helpers
    server.addresses.sort(key=lambda a: a.startswith("unix:"))
    server.socket_path = sock_path
    server.upstream = main_upstream
    server.tokens = tokens
    yield server
    assert server.stop() == 0, f"exit code {server.exit_code}; log: {server.log_path}"


def test_unix_socket_is_created_with_mode_0660(unix_proxy):
    st = os.stat(unix_proxy.socket_path)
    assert stat.S_ISSOCK(st.st_mode), f"{unix_proxy.socket_path} is not a socket: {oct(st.st_mode)}"
    mode = stat.S_IMODE(st.st_mode)
    assert mode == 0o660, f"socket mode {oct(mode)}, expected 0o660"
    assert any(a.startswith("unix:") for a in unix_proxy.addresses), unix_proxy.addresses


def test_unix_socket_serves_control_mock_and_credentialed_routes(unix_proxy):
    r = unix_request(unix_proxy.socket_path, "GET", "/_platform/health", {"Host": "localhost"})
    assert r.status == 200 and r.json() == {"status": "ok"}, str(r)
    r = unix_request(unix_proxy.socket_path, "GET", "/m/a", {"Host": "localhost"})
    assert r.status == 200 and r.json() == {"mock": "a"}, str(r)
    r = unix_request(unix_proxy.socket_path, "GET", "/api/echo", {"Host": "localhost"})
    assert r.status == 200, str(r)
    rec = unix_proxy.upstream.records[-1]
    assert rec.header_all("Authorization") == [f"Bearer {unix_proxy.tokens.access}"], str(rec)


def test_unix_socket_applies_the_host_check_too(unix_proxy):
    r = unix_request(unix_proxy.socket_path, "GET", "/api/echo", {"Host": "evil.example"})
    assert_error_json(r, 403, "host_not_allowed")
    assert not unix_proxy.upstream.records


def test_unix_socket_keeps_connections_alive(unix_proxy):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(unix_proxy.socket_path)
        reader = ResponseReader(s, timeout=5)
        for i in range(3):
            s.sendall(build_request("GET", f"/open/echo?i={i}", {"Host": "localhost"}))
            r = reader.read_response()
            assert r.status == 200, f"request {i}:\n{r}"
            assert not r.wants_close, str(r)


# --------------------------------------------------------------------------- TRACE / TRACK


@pytest.mark.parametrize("method", ["TRACE", "TRACK"])
@pytest.mark.parametrize("path", ["/api/echo", "/open/echo", "/m/a", "/_platform/health"], ids=path_id)
def test_trace_and_track_are_refused_405_and_never_echo_credentials(secure, method, path):
    hdrs = {"Host": secure.host_header, "Connection": "close", "X-Echo-Canary": "canary-4711",
            "Authorization": "Bearer client-side-secret"}
    ex = secure.exchange(build_request(method, path, hdrs), timeout=5)
    r = ex.final
    assert r is not None, f"{method} {path}: {ex.outcome} {ex.data[:300]!r}"
    assert_error_json(r, 405, "method_not_allowed")
    for secret in (b"canary-4711", b"client-side-secret", secure.tokens.access.encode(), secure.tokens.id.encode()):
        assert secret not in ex.data, f"{method} {path} echoed {secret!r}:\n{ex.data[:500]!r}"
    time.sleep(0.05)
    assert not [x for x in secure.upstream.records if x.method.upper() in ("TRACE", "TRACK")], \
        f"{method} reached the upstream:\n{secure.upstream.dump()}"


@pytest.mark.parametrize("method", ["TRACE", "TRACK"])
def test_405_for_trace_names_the_allowed_methods(secure, method):
    # RFC 9110 §15.5.6: a 405 response MUST carry Allow.
    r = secure.request(method, "/api/echo")
    assert r.status == 405, str(r)
    allow = r.header("Allow")
    assert allow, f"405 without Allow:\n{r}"
    methods = {m.strip().upper() for m in allow.split(",")}
    assert "GET" in methods and "TRACE" not in methods and "TRACK" not in methods, allow


# --------------------------------------------------------------------------- hostile upstream response fields


def _raw_upstream(response: bytes):
    """A one-shot upstream that answers every request on its connection with ``response``."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            if read_head(conn) is None:
                return
            conn.sendall(response)

    threading.Thread(target=serve, daemon=True).start()
    return server


def _fetch_through(start_proxy, tmp_path, response: bytes, credentialed: bool = False) -> bytes:
    """What a client gets for ``GET /x`` through a route to an upstream answering ``response``
    (with a static token injected when ``credentialed``)."""
    upstream = _raw_upstream(response)
    try:
        extra = {"provider": static_provider(make_tokens(tmp_path))} if credentialed else {}
        proxy = start_proxy(base_config(**extra, routes=[
            {"name": "raw", "path": "/", "upstream": f"http://127.0.0.1:{upstream.getsockname()[1]}/",
             "credential": "access_token" if credentialed else "none", "timeoutSeconds": 5}]))
        with proxy.connect() as sock:
            sock.sendall(build_request("GET", "/x", {"Host": proxy.host_header, "Connection": "close"}))
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
        assert proxy.proc.poll() is None, "the proxy died"
        return raw
    finally:
        upstream.close()


def test_upstream_fields_that_are_not_tokens_or_hold_control_bytes_never_reach_the_client(start_proxy, tmp_path):
    body = b'{"ok":true}'
    response = (b"HTTP/1.1 200 OK\r\n"
                b"X-Good: kept\r\n"
                b"Bad Name: space in the name\r\n"
                b": empty name\r\n"
                b"X(paren): not a token\r\n"
                b"X-Cr: a\rSet-Cookie: injected=1\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    raw = _fetch_through(start_proxy, tmp_path, response, credentialed=True)
    head, _, got = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), raw
    assert got == body
    assert b"X-Good: kept" in head
    for bad in (b"Bad Name", b"empty name", b"X(paren)", b"injected", b"X-Cr"):
        assert bad not in head, head


@pytest.mark.parametrize("status_line", [b"HTTP/2 99999999999999999999999 OK", b"HTTP/1.1 2000 OK", b"HTTP/2 20 OK"])
def test_an_upstream_status_that_is_not_three_digits_is_502_and_the_proxy_lives(start_proxy, tmp_path, status_line):
    raw = _fetch_through(start_proxy, tmp_path, status_line + b"\r\nContent-Length: 2\r\n\r\nok")
    assert raw.startswith(b"HTTP/1.1 502"), raw[:300]
    assert b"upstream_unreachable" in raw


def test_upstream_content_length_beside_transfer_encoding_cannot_smuggle_a_response(start_proxy, tmp_path):
    # curl decodes the chunks and ignores the length; relaying "Content-Length: 5" with the
    # decoded 32 bytes would hand the client a second, upstream-chosen response.
    body = b"helloHTTP/1.1 299 Smuggled\r\n\r\nX"
    raw = _fetch_through(start_proxy, tmp_path,
                         b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + f"{len(body):x}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n")
    reader = ResponseReader(socket.socket(), timeout=1)  # parse the bytes we already have
    reader.buf, reader.eof = raw, True
    first = reader.read_response()
    assert first.status == 200 and first.body == body, raw[:400]
    assert first.header("Content-Length") is None
    assert reader.buf == b"", f"bytes after the response: {reader.buf[:200]!r}"


def test_a_client_timeout_and_its_upstream_head_timeout_falling_due_together_do_not_crash(start_proxy):
    # Both deadlines come from one batch's clock when they are equal: the client's idle timeout
    # closes the connection and cancels the transfer whose head timeout is due in the same batch.
    import threading

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(128)
    held: list[socket.socket] = []

    def accept_and_ignore():
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_ignore, daemon=True).start()
    proxy = start_proxy(base_config(routes=[
        {"name": "u", "path": "/", "upstream": f"http://127.0.0.1:{silent.getsockname()[1]}/", "credential": "none",
         "timeoutSeconds": 1}], limits={"idleTimeoutSeconds": 1}, workers=1))
    clients = []
    try:
        for _ in range(2):
            for _ in range(30):
                c = socket.create_connection((proxy.host, proxy.port))
                c.sendall(b"POST /x HTTP/1.1\r\nHost: " + proxy.host_header.encode() + b"\r\nContent-Length: 10\r\n\r\n")
                clients.append(c)
            time.sleep(1.6)
            assert proxy.proc.poll() is None, proxy.stderr_text()[-2000:]
    finally:
        for c in clients + held:
            c.close()
        silent.close()
