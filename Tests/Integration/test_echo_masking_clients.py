"""Echo masking as real clients meet it: browsers, `requests`, OkHttp and URLSession ask for
gzip, some send ranges, and PHP's `json_encode` escapes `/`. On a masked route the proxy must see
(and the client gets) the whole body in its identity form, so the token never comes back
compressed, in slices or escaped, and never reaches a recording on disk.
"""

from __future__ import annotations

import gzip
import json
import re
import secrets
import time
import zlib

import pytest
import requests

from proxy import RawUpstream, base_config, read_head
from test_forwarding import make_tokens, static_provider


class CompressingUpstream(RawUpstream):
    """An upstream on loopback that answers each request with a JSON echo of its Authorization
    value, as real servers do: compressed by the first coding it knows in the request's
    `Accept-Encoding` (`mode="negotiate"`), or gzip or deflate whatever was asked
    (`mode="gzip"`, `"deflate"`), and a byte range of the body when a `Range`, or the older
    `Request-Range` Apache httpd still reads, asks for one (206, as a static file server). `escape_slashes` writes `/` as `\\/` (PHP's `json_encode`).
    Each request's header fields are kept, lowercased, in `seen`."""

    def __init__(self, mode: str = "negotiate", escape_slashes: bool = False):
        self.mode = mode
        self.escape_slashes = escape_slashes
        self.seen: list[dict[str, str]] = []
        self.lines: list[list[str]] = []
        super().__init__()

    def body(self, auth: str) -> bytes:
        token = auth.split(" ", 1)[-1]
        text = json.dumps({"authorization": auth, "pad": "p" * 300, "token": token, "tail": "t" * 50})
        if self.escape_slashes:
            text = text.replace("/", "\\/")
        return text.encode()

    def _serve(self, conn):
        with conn:
            got = read_head(conn)
            if got is None:
                return
            lines = got[0].decode("latin-1").split("\r\n")[1:]
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
            self.seen.append(fields)
            self.lines.append(lines)
            body = self.body(fields.get("authorization", ""))
            status, extra = "200 OK", ""
            # Apache httpd (and Squid) read `Request-Range` when there is no `Range`.
            ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", fields.get("range", fields.get("request-range", "")))
            if ranged:
                start = int(ranged.group(1))
                end = int(ranged.group(2)) if ranged.group(2) else len(body) - 1
                extra = f"Content-Range: bytes {start}-{end}/{len(body)}\r\n"
                body, status = body[start:end + 1], "206 Partial Content"
            coding = self.mode
            if coding == "negotiate":
                asked = [c.split(";")[0].strip() for c in fields.get("accept-encoding", "").split(",")]
                coding = next((c for c in asked if c in ("gzip", "deflate")), "identity")
            if coding == "gzip":
                body, extra = gzip.compress(body), extra + "Content-Encoding: gzip\r\n"
            elif coding == "deflate":
                body, extra = zlib.compress(body), extra + "Content-Encoding: deflate\r\n"
            elif coding != "identity":
                extra += f"Content-Encoding: {coding}\r\n"
            conn.sendall((f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nVary: Accept-Encoding\r\n{extra}"
                          f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)


@pytest.fixture
def upstreams():
    made: list[CompressingUpstream] = []

    def make(**kw) -> CompressingUpstream:
        made.append(CompressingUpstream(**kw))
        return made[-1]

    yield make
    for up in made:
        up.close()


def masked_proxy(start_proxy, tmp_path, upstream: CompressingUpstream, token: str | None = None, mock_dir=None):
    """A proxy with a masked route `/api/`, an uncredentialed route `/open/` to the same upstream
    and, with `mock_dir`, a route `/rec/` recording into it and `/replay/` replaying it."""
    tokens = make_tokens(tmp_path / "tokens")
    if token is not None:
        tokens.access_path.write_text(token)
        tokens.access = token
    routes = [
        {"name": "api", "path": "/api/", "upstream": upstream.url("/"), "credential": "access_token"},
        {"name": "open", "path": "/open/", "upstream": upstream.url("/"), "credential": "none"},
    ]
    if mock_dir is not None:
        routes += [
            {"name": "rec", "path": "/rec/", "upstream": upstream.url("/"), "credential": "access_token",
             "mock": {"directory": str(mock_dir), "mode": "record"}},
            {"name": "replay", "path": "/replay/", "mock": {"directory": str(mock_dir), "mode": "replay"}},
        ]
    server = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes), name="mask")
    server.tokens = tokens
    return server


def masked_metric(server) -> int:
    text = server.get("/_platform/metrics").body.decode()
    m = re.search(r'^platform_proxy_echoed_credentials_masked_total{route="api"} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def url(server, path: str) -> str:
    return f"http://{server.host_header}{path}"


@pytest.mark.parametrize("accept_encoding", [None, "gzip", "deflate", "gzip, deflate, br", "br;q=1.0, gzip;q=0.8, *;q=0.1"])
def test_a_client_asking_for_compression_gets_the_echo_masked(start_proxy, tmp_path, upstreams, accept_encoding):
    # `requests` sends "gzip, deflate" by default (None keeps its default), as browsers, OkHttp
    # and URLSession ask for compression by default.
    up = upstreams()
    server = masked_proxy(start_proxy, tmp_path, up)
    headers = {} if accept_encoding is None else {"Accept-Encoding": accept_encoding}
    r = requests.get(url(server, "/api/echo"), headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    token = server.tokens.access
    assert [line for line in up.lines[-1] if line.lower().startswith("accept-encoding")] == ["Accept-Encoding: identity"]
    assert "content-encoding" not in {k.lower() for k in r.headers}, r.headers
    assert token not in r.text and token.encode() not in r.content
    assert r.json()["token"] == "*" * len(token)
    assert r.json()["authorization"] == "Bearer " + "*" * len(token)
    assert masked_metric(server) == 2


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_an_upstream_that_compresses_unasked_is_decoded_and_masked(start_proxy, tmp_path, upstreams, coding):
    up = upstreams(mode=coding)
    server = masked_proxy(start_proxy, tmp_path, up)
    for accept in ("identity", "gzip"):
        r = server.get("/api/echo", headers={"Accept-Encoding": accept})
        assert r.status == 200, str(r)
        assert r.header("content-encoding") is None, str(r)
        token = server.tokens.access
        assert token.encode() not in r.raw_head + r.body
        assert json.loads(r.body)["token"] == "*" * len(token)
        # The upstream's length was the compressed body's: the client gets the decoded one, framed anew.
        assert r.header("content-length") in (None, str(len(r.body))), str(r)


@pytest.mark.parametrize("field, extra, dropped", [
    ("Range", {"If-Range": '"v1"'}, ("range", "if-range")),
    # Apache httpd's byte-range filter reads `Request-Range` (Netscape's name) when a request has
    # no `Range`: two slices cut inside the token would hand the app both halves of it.
    ("Request-Range", {}, ("request-range",)),
], ids=["range", "request-range"])
def test_ranges_on_masked_routes_get_the_whole_masked_body(start_proxy, tmp_path, upstreams, field, extra, dropped):
    up = upstreams(mode="identity")
    server = masked_proxy(start_proxy, tmp_path, up)
    token = server.tokens.access
    whole = up.body("Bearer " + token)
    cut = whole.index(token.encode()) + len(token) // 2
    pieces = []
    for rng in (f"bytes=0-{cut - 1}", f"bytes={cut}-"):
        r = server.get("/api/echo", headers={field: rng, **extra})
        assert not any(name in up.seen[-1] for name in dropped), up.seen[-1]
        assert r.status == 200, str(r)
        assert r.header("content-range") is None, str(r)
        pieces.append(r.body)
    for body in pieces:
        assert token.encode() not in body and json.loads(body)["token"] == "*" * len(token)
    assert token.encode() not in pieces[0][:cut] + pieces[1][cut:]


def test_a_json_escaped_echo_is_masked(start_proxy, tmp_path, upstreams):
    up = upstreams(mode="identity", escape_slashes=True)
    token = "at/" + secrets.token_hex(12) + "/x+y/" + secrets.token_hex(8)
    server = masked_proxy(start_proxy, tmp_path, up, token=token)
    r = server.get("/api/echo")
    assert r.status == 200, str(r)
    escaped = token.replace("/", "\\/")
    assert escaped.encode() in up.body("Bearer " + token)
    assert escaped.encode() not in r.body and token.encode() not in r.body, r.body
    assert json.loads(r.body)["token"] == "*" * len(escaped)
    assert int(r.header("content-length")) == len(r.body)


@pytest.mark.parametrize("mode", ["negotiate", "gzip"])
def test_a_recording_of_a_compressed_response_is_decoded_masked_and_replayed_readable(start_proxy, tmp_path, upstreams, mode):
    up = upstreams(mode=mode)
    mock_dir = tmp_path / "mocks"
    server = masked_proxy(start_proxy, tmp_path, up, mock_dir=mock_dir)
    token = server.tokens.access
    r = requests.get(url(server, "/rec/item"), headers={"Accept-Encoding": "gzip, deflate"}, timeout=10)
    assert r.status_code == 200, r.text
    path = mock_dir / "item.json"
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    content = path.read_bytes()
    assert token.encode() not in content
    assert json.loads(content)["token"] == "*" * len(token), content[:80]
    replayed = requests.get(url(server, "/replay/item"), timeout=10)
    assert replayed.status_code == 200 and replayed.json()["token"] == "*" * len(token)


def test_a_gzip_mock_file_is_served_with_its_content_encoding(start_proxy, tmp_path, upstreams):
    mock_dir = tmp_path / "mocks"
    mock_dir.mkdir()
    (mock_dir / "packed.json").write_bytes(gzip.compress(b'{"packed": true}'))
    server = masked_proxy(start_proxy, tmp_path, upstreams(), mock_dir=mock_dir)
    r = requests.get(url(server, "/replay/packed"), timeout=10)
    assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip"
    assert r.json() == {"packed": True}


def test_routes_without_a_token_keep_the_clients_encoding_and_ranges(start_proxy, tmp_path, upstreams):
    up = upstreams()
    server = masked_proxy(start_proxy, tmp_path, up)
    r = server.get("/open/echo", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-9"})
    assert r.status == 206, str(r)
    assert up.seen[-1]["accept-encoding"] == "gzip" and up.seen[-1]["range"] == "bytes=0-9"
    assert r.header("content-encoding") == "gzip"
    assert gzip.decompress(r.body) == up.body("")[:10]


def test_an_encoding_the_proxy_cannot_decode_is_not_relayed_on_a_masked_route(start_proxy, tmp_path, upstreams):
    # The masker cannot read it, so neither may the app: a 502, not the bytes.
    up = upstreams(mode="x-private")
    server = masked_proxy(start_proxy, tmp_path, up)
    r = server.get("/api/echo")
    assert r.status == 502, str(r)
    assert server.tokens.access.encode() not in r.raw_head + r.body
