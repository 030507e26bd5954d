"""Tokens that come back, end to end: an upstream that reflects request
headers must not hand the injected token to the app (headers or body, across chunk
boundaries), nor get it written into a recording; ``maskEchoedCredentials: false`` turns the
masking off.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import threading

import pytest

from proxy import base_config, build_request, read_head
from test_forwarding import make_tokens, static_provider


class EchoingUpstream:
    """An upstream on loopback that answers each request (one connection per request) with
    `respond(conn, auth)`, given the request's Authorization value."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            got = read_head(conn)
            if got is None:
                return
            head = got[0].decode("latin-1")
            auth = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")[1:]
                         if line.lower().startswith("authorization:")), "")
            self.respond(conn, auth)

    def respond(self, conn, auth: str):
        raise NotImplementedError

    def close(self):
        self.stopping = True
        self.sock.close()


class ReflectingUpstream(EchoingUpstream):
    """Answers every request with its Authorization value in a header and, chunked in tiny
    pieces, in the body."""

    def __init__(self, piece: int = 3):
        self.piece = piece
        super().__init__()

    def respond(self, conn, auth: str):
        token = auth.split(" ", 1)[-1]
        body = json.dumps({"authorization": auth, "token": token, "pad": "x" * 1000, "again": token}).encode()
        # The token also comes back as part of a field name, and a field the Connection lists
        # (hop-by-hop, RFC 9110 §7.6.1) must not reach the app either.
        out = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Echo-Authorization: {auth}\r\n"
               f"X-Seen-{token}: 1\r\nX-Upper-{token.upper()}: 2\r\nX-Hop: must-not-be-relayed\r\n"
               f"Set-Cookie: debug={token}; Path=/\r\nTransfer-Encoding: chunked\r\nConnection: close, X-Hop\r\n\r\n"
               ).encode()
        for i in range(0, len(body), self.piece):
            part = body[i:i + self.piece]
            out += b"%x\r\n" % len(part) + part + b"\r\n"
        conn.sendall(out + b"0\r\n\r\n")


@pytest.fixture
def reflecting():
    up = ReflectingUpstream()
    yield up
    up.close()


def echo_proxy(start_proxy, tmp_path, upstream_url: str, record_dir=None, **top):
    tokens = make_tokens(tmp_path / "tokens")
    routes = [
        {"name": "api", "path": "/api/", "upstream": upstream_url, "credential": "access_token", "timeoutSeconds": 10},
        {"name": "jwt", "path": "/jwt/", "upstream": upstream_url, "credential": "jwt", "timeoutSeconds": 10},
    ]
    if record_dir is not None:
        routes.append({"name": "rec", "path": "/rec/", "upstream": upstream_url, "credential": "access_token",
                       "timeoutSeconds": 10, "mock": {"directory": str(record_dir), "mode": "record"}})
    server = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes, **top), name="echo")
    server.tokens = tokens
    return server


def fetch(server, path: str) -> bytes:
    with server.connect() as sock:
        sock.sendall(build_request("GET", path, {"Host": server.host_header, "Connection": "close"}))
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return raw


def masked_metric(server, route: str) -> int:
    text = server.get("/_platform/metrics").body.decode()
    m = re.search(rf'^platform_proxy_echoed_credentials_masked_total{{route="{route}"}} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def test_echoed_token_is_masked_in_headers_and_chunked_body(start_proxy, tmp_path, reflecting):
    server = echo_proxy(start_proxy, tmp_path, reflecting.url("/"))
    for path, token in (("/api/x", server.tokens.access), ("/jwt/x", server.tokens.id)):
        r = server.get(path)
        assert r.status == 200, str(r)
        raw = fetch(server, path)
        assert token.encode() not in raw, f"the token came back to the client:\n{raw[:600]!r}"
        mask = "*" * len(token)
        assert r.header("x-echo-authorization") == f"Bearer {mask}", str(r)
        assert r.header(f"x-seen-{mask}") == "1", str(r)
        assert r.header(f"x-upper-{mask}") == "2", str(r)  # a re-cased echo in a name is masked too
        assert token.upper().encode() not in raw, raw[:600]
        assert r.header("x-hop") is None, str(r)
        body = r.json()
        assert body["token"] == mask and body["again"] == mask and body["authorization"] == f"Bearer {mask}"
    assert masked_metric(server, "api") >= 2 * 4


def test_echoed_token_is_masked_in_a_content_length_body_which_keeps_its_length(start_proxy, tmp_path, main_upstream):
    # The recording upstream echoes the request it saw (headers included) as JSON.
    server = echo_proxy(start_proxy, tmp_path, main_upstream.url("/base/"))
    r = server.get("/api/echo")
    assert r.status == 200, str(r)
    assert server.tokens.access.encode() not in r.body
    assert int(r.header("content-length")) == len(r.body)
    assert "*" * len(server.tokens.access) in r.body.decode()
    assert main_upstream.records[0].header("authorization") == f"Bearer {server.tokens.access}"


def test_echoed_token_is_relayed_when_masking_is_switched_off(start_proxy, tmp_path, reflecting):
    server = echo_proxy(start_proxy, tmp_path, reflecting.url("/"), maskEchoedCredentials=False)
    r = server.get("/api/x")
    assert r.json()["token"] == server.tokens.access
    assert masked_metric(server, "api") == 0


def test_recording_never_holds_the_token_and_is_private(start_proxy, tmp_path, reflecting):
    record_dir = tmp_path / "recorded"
    for switch in (True, False):
        server = echo_proxy(start_proxy, tmp_path / str(switch), reflecting.url("/"), record_dir=record_dir,
                            maskEchoedCredentials=switch)
        r = server.get(f"/rec/item-{switch}")
        assert r.status == 200, str(r)
        path = record_dir / f"item-{switch}.json"
        for _ in range(100):
            if path.exists():
                break
            threading.Event().wait(0.02)
        content = path.read_text()
        assert server.tokens.access not in content, f"the token was written into {path}"
        assert "*" * len(server.tokens.access) in content
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, oct(os.stat(path).st_mode)


class LengthUpstream(EchoingUpstream):
    """Answers every request with a Content-Length body made from the request's token by
    `shape(token)`, echoing the Authorization value in a header too; the body goes out in
    pieces of `piece` bytes with a pause between them, so they reach the proxy as separate
    chunks."""

    def __init__(self, shape, piece: int = 7):
        self.shape = shape
        self.piece = piece
        super().__init__()

    def respond(self, conn, auth: str):
        body = self.shape(auth.split(" ", 1)[-1]).encode()
        conn.sendall((f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Echo-Authorization: {auth}\r\n"
                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode())
        for i in range(0, len(body), self.piece):
            conn.sendall(body[i:i + self.piece])
            threading.Event().wait(0.01)


@pytest.mark.parametrize("shape, masked_in_body", [
    # The chunk that completes the body ends with the token: masked.
    (lambda token: "value=" + token, 1),
    # It ends with a proper prefix of the token: relayed as it is.
    (lambda token: "value=" + token[:-1], 0),
    # A body shorter than the token cannot hold it: relayed as it is, the header still masked.
    (lambda token: token[:5], 0),
    (lambda token: "", 0),
], ids=["ends-with-token", "ends-with-prefix", "shorter-than-token", "empty"])
def test_echo_masking_of_content_length_bodies_ending_at_or_before_a_token(start_proxy, tmp_path, shape, masked_in_body):
    up = LengthUpstream(shape)
    try:
        server = echo_proxy(start_proxy, tmp_path, up.url("/"))
        token = server.tokens.access
        r = server.get("/api/x")
        assert r.status == 200, str(r)
        expected = shape(token).replace(token, "*" * len(token))
        assert r.body.decode() == expected
        assert int(r.header("content-length")) == len(r.body)
        assert r.header("x-echo-authorization") == "Bearer " + "*" * len(token), str(r)
        assert token.encode() not in r.raw_head + r.body
        # The header's mask counts whether or not the body was scanned.
        assert masked_metric(server, "api") == 1 + masked_in_body
    finally:
        up.close()


class UnreadableFramingUpstream(EchoingUpstream):
    """Echoes the token in a body framed by a second framing field whose value holds a bare CR
    (`Content-Length: 41` then `Content-Length: <real>\\rX`): libcurl reads the body by the
    second field, which a relay that drops the line would not see."""

    def __init__(self, first_length: int, field: str):
        self.first_length = first_length
        self.field = field
        super().__init__()

    def respond(self, conn, auth: str):
        body = (auth.split(" ", 1)[-1] + "-tail-" + "." * 10).encode()
        second = self.field.replace("{real}", str(len(body)))
        conn.sendall((f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {self.first_length}\r\n"
                      f"{second}\r\nConnection: close\r\n\r\n").encode() + body)


@pytest.mark.parametrize("first_length", [5, 41])
@pytest.mark.parametrize("field", ["Content-Length: {real}\rX", "content-length: {real}\x00", "Transfer-Encoding: chunked\rX"],
                         ids=["cl-cr", "cl-nul", "te-cr"])
def test_a_framing_field_with_a_cr_or_nul_in_its_value_refuses_the_response(start_proxy, tmp_path, first_length, field):
    # Dropping such a line as another field would leave the client's framing (the first length)
    # and libcurl's (the second) apart: the response is not relayed, and no byte of the token is.
    up = UnreadableFramingUpstream(first_length, field)
    try:
        server = echo_proxy(start_proxy, tmp_path, up.url("/"))
        raw = fetch(server, "/api/x")
        assert raw.startswith(b"HTTP/1.1 502 "), raw[:200]
        token = server.tokens.access.encode()
        assert token[:4] not in raw, raw
    finally:
        up.close()
