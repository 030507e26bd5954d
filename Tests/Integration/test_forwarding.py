"""Forwarding (docs/forwarding.md), end to end: the real binary on loopback in front of a
real recording upstream (``upstream.py``) and a second, "foreign" one on
another port.

What each test protects is in its name. Assertions are made on what the
upstream recorded (the authority on what the proxy sent), and on what the
client got back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from proxy import ProxyProcess, ResponseReader, base_config, build_request
from upstream import Record, Upstream, pattern_sha256

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
RETRY_BODY_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
REDIRECT_MAX = 5
INJECTED = ("authorization", "x-authorization")


# --------------------------------------------------------------------------- fixtures and helpers


@dataclass
class Tokens:
    access_path: Path
    id_path: Path
    access: str
    id: str

    def rotate_access(self, new: str, atomic: bool = False) -> None:
        if atomic:
            tmp = self.access_path.with_name(self.access_path.name + ".new")
            tmp.write_text(new)
            os.replace(tmp, self.access_path)
        else:
            with open(self.access_path, "w") as f:  # truncate and rewrite in place
                f.write(new)
        self.access = new

    @property
    def all(self) -> tuple[str, str]:
        return (self.access, self.id)


def make_tokens(directory: Path) -> Tokens:
    directory.mkdir(parents=True, exist_ok=True)
    t = Tokens(directory / "access-token.txt", directory / "id-token.txt",
               "at-" + secrets.token_hex(20), "idt-" + secrets.token_hex(20))
    t.access_path.write_text(t.access)
    t.id_path.write_text(t.id)
    return t


def static_provider(tokens: Tokens) -> dict:
    return {"grant": "static",
            "accessToken": {"file": str(tokens.access_path)},
            "idToken": {"file": str(tokens.id_path)}}


def unused_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def forwarding_routes(main: Upstream, foreign: Upstream, dead_port: int) -> list[dict]:
    base = main.url("/base/")
    return [
        {"name": "api", "path": "/api/", "upstream": base, "credential": "access_token",
         "redirects": {"follow": True, "max": REDIRECT_MAX}, "timeoutSeconds": 10},
        {"name": "jwt", "path": "/jwt/", "upstream": base, "credential": "jwt", "timeoutSeconds": 10},
        {"name": "custom", "path": "/custom/", "upstream": base, "credential": "access_token",
         "headers": ["X-Api-Token", "X-Second-Token"], "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": base, "credential": "none",
         "redirects": {"follow": True, "max": REDIRECT_MAX}, "timeoutSeconds": 10},
        {"name": "trusted", "path": "/trusted/", "upstream": base, "credential": "access_token",
         "redirects": {"follow": True, "max": REDIRECT_MAX,
                       "credentialHosts": [main.host_port, foreign.host_port]}, "timeoutSeconds": 10},
        {"name": "nofollow", "path": "/nofollow/", "upstream": base, "credential": "access_token",
         "redirects": {"follow": False}, "timeoutSeconds": 10},
        {"name": "short", "path": "/short/", "upstream": base, "credential": "access_token",
         "timeoutSeconds": 1},
        {"name": "down", "path": "/down/", "upstream": f"http://127.0.0.1:{dead_port}/base/",
         "credential": "access_token", "timeoutSeconds": 10},
    ]


@dataclass
class Fwd:
    """A running proxy with the forwarding routes, its upstreams and tokens."""

    proxy: ProxyProcess
    main: Upstream
    foreign: Upstream
    tokens: Tokens

    def request(self, method: str, path: str, headers: dict | None = None, body: bytes = b"",
                timeout: float = 10.0):
        return self.proxy.request(method, path, headers=headers, body=body, timeout=timeout)

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def raw(self, data: bytes, timeout: float = 10.0):
        return self.proxy.exchange(data, timeout=timeout)

    def head(self, method: str, path: str, headers: dict | None = None) -> bytes:
        """A request head (no body) with Host, for raw sends."""
        hdrs = {"Host": self.proxy.host_header}
        hdrs.update(headers or {})
        return build_request(method, path, hdrs)

    def evidence(self) -> str:
        return (f"--- main upstream recorded:\n{self.main.dump()}\n"
                f"--- foreign upstream recorded:\n{self.foreign.dump()}")


@pytest.fixture
def tokens(tmp_path) -> Tokens:
    return make_tokens(tmp_path / "tokens")


@pytest.fixture
def make_fwd(start_proxy, main_upstream, foreign_upstream, tokens):
    """Factory: ``make_fwd(**top_level_overrides) -> Fwd`` (``limits`` is merged)."""

    def _make(**overrides) -> Fwd:
        limits = {"retryBodyBytes": RETRY_BODY_BYTES, "maxBodyBytes": MAX_BODY_BYTES}
        limits.update(overrides.pop("limits", {}))
        cfg = base_config(None, provider=static_provider(tokens),
                          routes=forwarding_routes(main_upstream, foreign_upstream, unused_port()),
                          limits=limits, **overrides)
        server = start_proxy(config=cfg, name="fwd")
        return Fwd(server, main_upstream, foreign_upstream, tokens)

    return _make


@pytest.fixture
def fwd(make_fwd) -> Fwd:
    return make_fwd()


def assert_error_json(resp, status: int, code: str) -> dict:
    """A proxy-made error: the status, JSON {error, message, requestID}, X-Request-ID."""
    assert resp is not None, "no response"
    assert resp.status == status, f"expected {status} {code}, got:\n{resp}"
    ctype = (resp.header("content-type") or "").split(";")[0].strip()
    assert ctype == "application/json", f"error Content-Type {ctype!r}:\n{resp}"
    body = resp.json()
    assert body.get("error") == code, body
    assert SNAKE_CASE.match(body["error"])
    assert isinstance(body.get("message"), str) and body["message"], body
    assert body.get("requestID"), body
    assert resp.header("x-request-id") == body["requestID"], str(resp)
    return body


def only(records: list[Record], what: str = "") -> Record:
    assert len(records) == 1, f"expected exactly one upstream request {what}, got {len(records)}:\n" + \
        "\n".join(map(str, records))
    return records[0]


def q(url: str) -> str:
    return quote(url, safe="")


# --------------------------------------------------------------------------- credential injection


def test_access_token_is_injected_into_both_default_headers(fwd):
    r = fwd.get("/api/echo")
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(rec)
    assert rec.header_all("X-Authorization") == [f"Bearer {fwd.tokens.access}"], str(rec)
    assert fwd.tokens.id not in str(rec.headers)


def test_jwt_route_sends_the_id_token_in_both_headers(fwd):
    r = fwd.get("/jwt/echo")
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("Authorization") == [f"Bearer {fwd.tokens.id}"], str(rec)
    assert rec.header_all("X-Authorization") == [f"Bearer {fwd.tokens.id}"], str(rec)
    assert fwd.tokens.access not in str(rec.headers), str(rec)


def test_custom_headers_list_carries_the_token_instead_of_the_defaults(fwd):
    r = fwd.get("/custom/echo", headers={"X-Api-Token": "client-value"})
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("X-Api-Token") == [f"Bearer {fwd.tokens.access}"], str(rec)
    assert rec.header_all("X-Second-Token") == [f"Bearer {fwd.tokens.access}"], str(rec)
    assert "authorization" not in rec.header_names(), str(rec)
    assert "x-authorization" not in rec.header_names(), str(rec)


def test_client_authorization_is_replaced_not_merged_on_credentialed_route(fwd):
    # two client copies of Authorization and one X-Authorization, any case: all replaced by one each
    raw = (fwd.head("GET", "/api/echo", {"Connection": "close"})[:-2]
           + b"Authorization: Bearer client-one\r\n"
           + b"authorization: Basic Y2xpZW50OnR3bw==\r\n"
           + b"X-AUTHORIZATION: Bearer client-three\r\n\r\n")
    ex = fwd.raw(raw)
    assert ex.status == 200, f"{ex.outcome}: {ex.data[:500]!r}"
    rec = only(fwd.main.records)
    assert rec.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(rec)
    assert rec.header_all("X-Authorization") == [f"Bearer {fwd.tokens.access}"], str(rec)
    for client_value in ("client-one", "Y2xpZW50OnR3bw==", "client-three"):
        assert client_value not in str(rec.headers), str(rec)


def test_client_authorization_passes_through_on_none_route(fwd):
    r = fwd.get("/open/echo", headers={"Authorization": "Bearer app-own-token",
                                       "X-Authorization": "app-x"})
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("Authorization") == ["Bearer app-own-token"], str(rec)
    assert rec.header_all("X-Authorization") == ["app-x"], str(rec)
    for token in fwd.tokens.all:
        assert token not in str(rec.headers), str(rec)


def test_none_route_injects_nothing(fwd):
    assert fwd.get("/open/echo").status == 200
    rec = only(fwd.main.records)
    assert "authorization" not in rec.header_names() and "x-authorization" not in rec.header_names(), str(rec)


# --------------------------------------------------------------------------- header policy


def test_hop_by_hop_and_proxy_key_headers_are_not_forwarded(fwd):
    raw = fwd.head("GET", "/api/echo", {
        "Connection": "keep-alive, X-Hop-Listed",
        "X-Hop-Listed": "must-not-pass",
        "Keep-Alive": "timeout=5, max=100",
        "Proxy-Connection": "keep-alive",
        "TE": "trailers",
        "Trailer": "X-Checksum",
        "Upgrade": "h2c",
        "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
        "X-Proxy-Key": "local-proxy-key",
        "X-End-To-End": "kept",
    })
    ex = fwd.raw(raw)
    assert ex.status == 200, f"{ex.outcome}: {ex.data[:500]!r}"
    rec = only(fwd.main.records)
    names = rec.header_names()
    for dropped in ("x-hop-listed", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
                    "proxy-authorization", "x-proxy-key"):
        assert dropped not in names, f"{dropped} was forwarded:\n{rec}"
    for value in ("must-not-pass", "cHJveHk6c2VjcmV0", "local-proxy-key", "h2c", "X-Hop-Listed"):
        assert value not in str(rec.headers), f"{value!r} reached the upstream:\n{rec}"
    assert rec.header_all("X-End-To-End") == ["kept"], str(rec)


def test_forwarding_headers_are_set(fwd):
    r = fwd.get("/api/echo")
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("X-Forwarded-For") == ["127.0.0.1"], str(rec)
    assert rec.header_all("X-Forwarded-Proto") == ["http"], str(rec)
    assert rec.header_all("X-Forwarded-Host") == [fwd.proxy.host_header], str(rec)
    via = rec.header_all("Via")
    assert len(via) == 1 and re.match(r"^(HTTP/)?1\.1 \S+", via[0]), str(rec)
    # the upstream's own Host, not the client's
    assert rec.header_all("Host") == [fwd.main.host_port], str(rec)


def test_forwarded_for_and_via_extend_the_clients_values(fwd):
    r = fwd.get("/api/echo", headers={"X-Forwarded-For": "203.0.113.7", "Via": "1.1 edge"})
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    xff = ", ".join(rec.header_all("X-Forwarded-For"))
    assert [p.strip() for p in xff.split(",")] == ["203.0.113.7", "127.0.0.1"], str(rec)
    via = ", ".join(rec.header_all("Via"))
    assert via.startswith("1.1 edge, ") and len(via.split(",")) == 2, str(rec)


def test_forwarded_for_and_via_over_several_lines_keep_every_entry(fwd):
    """Was: only the last line of each was kept."""
    head = fwd.head("GET", "/api/echo")[:-2] + (b"X-Forwarded-For: 203.0.113.7\r\nVia: 1.0 a\r\n"
                                                b"X-Forwarded-For: 198.51.100.2\r\nVia: 1.1 b\r\n\r\n")
    ex = fwd.raw(head)
    assert ex.final is not None and ex.final.status == 200, ex.data
    rec = only(fwd.main.records)
    assert rec.header_all("X-Forwarded-For") == ["203.0.113.7, 198.51.100.2, 127.0.0.1"], str(rec)
    assert rec.header_all("Via") == ["1.0 a, 1.1 b, 1.1 platform-proxy"], str(rec)


def test_request_id_given_by_client_is_forwarded_and_echoed(fwd):
    r = fwd.get("/api/echo", headers={"X-Request-ID": "client-req-4711"})
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.header_all("X-Request-ID") == ["client-req-4711"], str(rec)
    assert r.header_all("X-Request-ID") == ["client-req-4711"], str(r)


def test_request_id_generated_when_absent_and_echoed(fwd):
    r1 = fwd.get("/api/echo")
    r2 = fwd.get("/api/echo")
    assert r1.status == r2.status == 200
    recs = fwd.main.records
    assert len(recs) == 2, fwd.evidence()
    ids = [rec.header_all("X-Request-ID") for rec in recs]
    assert all(len(i) == 1 and i[0] for i in ids), fwd.evidence()
    assert ids[0][0] != ids[1][0], ids
    assert r1.header_all("X-Request-ID") == ids[0], str(r1)
    assert r2.header_all("X-Request-ID") == ids[1], str(r2)


@pytest.mark.parametrize("client_path, upstream_target", [
    ("/api/x/y?q=1", "/base/x/y?q=1"),
    ("/api/", "/base/"),
    ("/api", "/base/"),
    ("/api/echo?a=1&a=2&b=%20c", "/base/echo?a=1&a=2&b=%20c"),
    ("/api/x%20y/z/", "/base/x%20y/z/"),
])
def test_path_and_query_are_joined_onto_the_upstream_base(fwd, client_path, upstream_target):
    r = fwd.get(client_path)
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert rec.target == upstream_target, str(rec)


def test_upstream_status_headers_and_body_are_relayed(fwd):
    r = fwd.get("/api/status?code=418")
    assert r.status == 418, str(r)
    assert r.header("X-Upstream") == "main", str(r)
    assert r.json() == {"status": 418}


# what the proxy itself may add to a request; everything else must come from the client
PROXY_ADDED = {"host", "content-length", "transfer-encoding", "x-forwarded-for", "x-forwarded-proto",
               "x-forwarded-host", "via", "x-request-id", "authorization", "x-authorization"}


@pytest.mark.parametrize("method, framing", [
    ("GET", None), ("POST", "length"), ("POST", "chunked"), ("PUT", "length"), ("DELETE", None)])
def test_no_request_headers_are_invented(fwd, method, framing):
    hdrs = {"Connection": "close", "X-Client": "1"}
    body = b""
    if framing == "length":
        body = b"raw-bytes-no-type"
        hdrs["Content-Length"] = str(len(body))
    elif framing == "chunked":
        hdrs["Transfer-Encoding"] = "chunked"
        body = b"5\r\nhello\r\n0\r\n\r\n"
    ex = fwd.raw(fwd.head(method, "/api/echo", hdrs) + body)
    assert ex.status == 200, f"{ex.outcome}: {ex.data[:300]!r}"
    rec = only(fwd.main.records)
    # A credentialed route's response is masked, so the proxy asks for it uncompressed.
    invented = [(k, v) for k, v in rec.headers if k.lower() not in PROXY_ADDED | {"x-client"}
                and (k.lower(), v) != ("accept-encoding", "identity")]
    assert not invented, f"{method} without Content-Type/Accept: the upstream got fields the client " \
                         f"never sent: {invented}\n{rec}"


def test_duplicate_and_empty_request_fields_pass_in_order(fwd):
    raw = (fwd.head("GET", "/api/echo", {"Connection": "close"})[:-2]
           + b"X-Dup: first\r\nX-Empty:\r\nX-Dup: second\r\nAccept: text/plain\r\n\r\n")
    ex = fwd.raw(raw)
    assert ex.status == 200, f"{ex.outcome}: {ex.data[:300]!r}"
    rec = only(fwd.main.records)
    assert rec.header_all("X-Dup") == ["first", "second"], str(rec)
    assert rec.header_all("X-Empty") == [""], str(rec)
    assert rec.header_all("Accept") == ["text/plain"], str(rec)


def test_repeated_response_fields_such_as_set_cookie_are_all_relayed(fwd):
    r = fwd.get("/api/cookies")
    assert r.status == 200, str(r)
    assert r.header_all("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/; HttpOnly"], str(r)
    assert r.header_all("X-Multi") in (["one", "two"], ["one, two"]), str(r)
    assert r.body == b"cookies\n"


def test_truncated_upstream_body_is_not_passed_off_as_complete(fwd):
    # the upstream promises 100000 bytes, sends 1000 and closes: the client must be able to tell
    ex = fwd.raw(fwd.head("GET", "/api/truncate?bytes=100000&send=1000"), timeout=5)
    resp = ex.final
    complete_but_short = (resp is not None and ex.parse_error is None and resp.status == 200
                          and len(resp.body) < 100000 and (resp.header("Transfer-Encoding") is not None
                                                            or resp.header("Content-Length") == str(len(resp.body))))
    assert not complete_but_short, \
        f"a cut-off upstream body reached the client as a complete {len(resp.body)}-byte response:\n{resp}"
    if resp is not None and resp.status == 200:
        assert ex.closed, "after a cut-off body the client connection must be closed"


# --------------------------------------------------------------------------- redirects: where credentials go


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_same_host_redirect_keeps_credentials_and_cookie(fwd, kind):
    to = fwd.main.url("/base/landing") if kind == "absolute" else "/base/landing"
    r = fwd.get(f"/api/redirect?status=302&to={q(to)}", headers={"Cookie": "session=same-host-cookie"})
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    assert r.json()["target"] == "/base/landing", str(r)
    recs = fwd.main.records
    assert [x.path for x in recs] == ["/base/redirect", "/base/landing"], fwd.evidence()
    hop = recs[1]
    assert hop.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(hop)
    assert hop.header_all("X-Authorization") == [f"Bearer {fwd.tokens.access}"], str(hop)
    assert hop.header_all("Cookie") == ["session=same-host-cookie"], str(hop)


def _assert_no_secrets(rec: Record, tokens: Tokens, also: tuple[str, ...] = ()) -> None:
    names = rec.header_names()
    for name in ("authorization", "x-authorization", "cookie", "proxy-authorization"):
        assert name not in names, f"{name} reached a host outside credentialHosts:\n{rec}"
    for k, v in rec.headers:
        for secret in tokens.all + also:
            assert secret not in v and secret not in k, f"secret {secret!r} in {k}: {v}\n{rec}"


def test_cross_host_redirect_sends_no_token_cookie_or_injected_headers(fwd):
    to = fwd.foreign.url("/landing?x=1")
    r = fwd.get(f"/api/redirect?status=302&to={q(to)}", headers={
        "Cookie": "session=secret-cookie-value",
        "Authorization": "Bearer client-own-secret",
        "Proxy-Authorization": "Basic cHJveHktc2VjcmV0",
    })
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    assert r.json()["upstream"] == "foreign", str(r)
    first = only(fwd.main.records, "on main")
    assert first.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(first)
    hop = only(fwd.foreign.records, "on foreign")
    assert hop.target == "/landing?x=1", str(hop)
    _assert_no_secrets(hop, fwd.tokens, ("secret-cookie-value", "client-own-secret", "cHJveHktc2VjcmV0"))


def test_stripped_hop_of_a_route_injecting_accept_and_content_type_gets_neither_header(
        start_proxy, main_upstream, foreign_upstream, tokens):
    """A route may inject its token under Accept or Content-Type (curl's own is then left out).
    On a hop to a foreign host nothing is injected, so curl must not add its defaults either:
    no `Accept: */*`, and no form Content-Type on a 307 POST's replayed body."""
    routes = [{"name": "named", "path": "/named/", "upstream": main_upstream.url("/base/"),
               "credential": "access_token", "headers": ["Accept", "Content-Type"],
               "redirects": {"follow": True, "max": 3, "crossHostMethods": "all"}, "timeoutSeconds": 10}]
    proxy = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes,
                                           limits={"retryBodyBytes": 65536}), name="named")
    to = foreign_upstream.url("/landing")
    for method, status in (("GET", 302), ("POST", 307)):
        foreign_upstream.clear()
        main_upstream.clear()
        r = proxy.request(method, f"/named/redirect?status={status}&to={q(to)}", body=b"x=1" if method == "POST" else b"")
        assert r.status == 200, f"{method}: {r}"
        first = only(main_upstream.records, "on main")
        assert first.header_all("Accept") == [f"Bearer {tokens.access}"], str(first)
        hop = only(foreign_upstream.records, "on foreign")
        assert hop.header_all("Accept") == [], f"{method}: curl's default Accept on the stripped hop:\n{hop}"
        assert hop.header_all("Content-Type") == [], f"{method}: a Content-Type on the stripped hop:\n{hop}"


def test_redirect_to_another_port_on_the_same_ip_is_another_host(fwd):
    # foreign listens on 127.0.0.1 too: only the port differs from the upstream's origin
    assert fwd.foreign.host == fwd.main.host and fwd.foreign.port != fwd.main.port
    for status in (301, 302, 303, 307, 308):
        fwd.foreign.clear()
        to = fwd.foreign.url(f"/other-port/{status}")
        r = fwd.get(f"/api/redirect?status={status}&to={q(to)}")
        assert r.status == 200, f"{status}: {r}\n{fwd.evidence()}"
        hop = only(fwd.foreign.records, f"after a {status}")
        _assert_no_secrets(hop, fwd.tokens)


def test_redirect_to_another_host_name_on_the_same_port_is_another_host(fwd):
    # "localhost:<port>" is not the upstream's "127.0.0.1:<port>", even if it resolves there
    to = f"http://localhost:{fwd.main.port}/base/alias"
    r = fwd.get(f"/api/redirect?status=302&to={q(to)}", headers={"Cookie": "c=alias-cookie"})
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    recs = fwd.main.records
    assert [x.path for x in recs] == ["/base/redirect", "/base/alias"], fwd.evidence()
    _assert_no_secrets(recs[1], fwd.tokens, ("alias-cookie",))


def test_redirect_to_a_listed_credential_host_gets_credentials(fwd):
    to = fwd.foreign.url("/trusted-landing")
    r = fwd.get(f"/trusted/redirect?status=302&to={q(to)}")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    hop = only(fwd.foreign.records, "on foreign")
    assert hop.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(hop)
    assert hop.header_all("X-Authorization") == [f"Bearer {fwd.tokens.access}"], str(hop)


def test_cross_host_redirect_on_none_route_strips_the_clients_authorization(fwd):
    to = fwd.foreign.url("/open-landing")
    r = fwd.get(f"/open/redirect?status=302&to={q(to)}", headers={
        "Authorization": "Bearer app-secret-for-main-only", "Cookie": "k=app-cookie"})
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    first = only(fwd.main.records, "on main")
    assert first.header_all("Authorization") == ["Bearer app-secret-for-main-only"], str(first)
    hop = only(fwd.foreign.records, "on foreign")
    _assert_no_secrets(hop, fwd.tokens, ("app-secret-for-main-only", "app-cookie"))


# The https -> http rule needs a TLS upstream: test_tls_upstream.py (nginx with a test CA).


# --------------------------------------------------------------------------- redirects: methods and bodies


@pytest.mark.parametrize("status", [307, 308])
def test_307_308_post_replays_method_and_body(fwd, status):
    body = secrets.token_bytes(40_000)  # under retryBodyBytes
    to = fwd.main.url("/base/upload")
    r = fwd.request("POST", f"/api/redirect?status={status}&to={q(to)}", body=body,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    want = hashlib.sha256(body).hexdigest()
    assert r.json()["sha256"] == want, str(r)
    recs = fwd.main.records
    assert [(x.method, x.path, x.body_length, x.body_sha256) for x in recs] == [
        ("POST", "/base/redirect", len(body), want), ("POST", "/base/upload", len(body), want)], fwd.evidence()


def test_307_chunked_small_body_is_replayed(fwd):
    body = secrets.token_bytes(10_000)
    to = fwd.main.url("/base/upload")
    chunks = b"".join(b"%x\r\n" % len(c) + c + b"\r\n" for c in (body[:3000], body[3000:3001], body[3001:]))
    raw = fwd.head("POST", f"/api/redirect?status=307&to={q(to)}",
                   {"Transfer-Encoding": "chunked", "Connection": "close"}) + chunks + b"0\r\n\r\n"
    ex = fwd.raw(raw)
    assert ex.status == 200, f"{ex.outcome}: {ex.data[:500]!r}\n{fwd.evidence()}"
    want = hashlib.sha256(body).hexdigest()
    recs = fwd.main.records
    assert [(x.method, x.path, x.body_length, x.body_sha256) for x in recs] == [
        ("POST", "/base/redirect", len(body), want), ("POST", "/base/upload", len(body), want)], fwd.evidence()


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_303_turns_the_request_into_get_without_body(fwd, method):
    to = fwd.main.url("/base/after-303")
    r = fwd.request(method, f"/api/redirect?status=303&to={q(to)}", body=b'{"a": 1}',
                    headers={"Content-Type": "application/json"})
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    recs = fwd.main.records
    assert len(recs) == 2, fwd.evidence()
    assert (recs[0].method, recs[0].body_length) == (method, 8), str(recs[0])
    hop = recs[1]
    assert (hop.method, hop.path, hop.body_length) == ("GET", "/base/after-303", 0), str(hop)
    assert hop.header("Transfer-Encoding") is None, str(hop)
    assert hop.header("Content-Length") in (None, "0"), str(hop)


@pytest.mark.parametrize("status", [301, 302])
def test_301_302_post_turns_into_get_without_body(fwd, status):
    to = fwd.main.url("/base/after")
    r = fwd.request("POST", f"/api/redirect?status={status}&to={q(to)}", body=b"form=1")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    recs = fwd.main.records
    assert len(recs) == 2, fwd.evidence()
    hop = recs[1]
    assert (hop.method, hop.path, hop.body_length) == ("GET", "/base/after", 0), str(hop)
    assert hop.header("Transfer-Encoding") is None, str(hop)
    assert hop.header("Content-Length") in (None, "0"), str(hop)


def test_307_with_body_over_retry_limit_is_relayed_to_the_client(fwd):
    body = secrets.token_bytes(RETRY_BODY_BYTES * 4)
    to = fwd.main.url("/base/upload")
    r = fwd.request("POST", f"/api/redirect?status=307&to={q(to)}", body=body)
    assert r.status == 307, f"{r}\n{fwd.evidence()}"
    assert r.header("Location") == to, str(r)
    rec = only(fwd.main.records)
    assert (rec.method, rec.path, rec.body_length, rec.complete) == ("POST", "/base/redirect", len(body), True), str(rec)
    assert rec.body_sha256 == hashlib.sha256(body).hexdigest()


def test_redirect_chain_of_exactly_max_hops_is_followed(fwd):
    r = fwd.get(f"/api/chain?n={REDIRECT_MAX}")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    assert r.json()["target"] == "/base/chain?n=0", str(r)
    assert len(fwd.main.records) == REDIRECT_MAX + 1, fwd.evidence()
    for rec in fwd.main.records:
        assert rec.header_all("Authorization") == [f"Bearer {fwd.tokens.access}"], str(rec)


def test_one_hop_over_max_gives_502_too_many_redirects(fwd):
    r = fwd.get(f"/api/chain?n={REDIRECT_MAX + 1}")
    assert_error_json(r, 502, "too_many_redirects")
    assert len(fwd.main.records) == REDIRECT_MAX + 1, fwd.evidence()


def test_redirect_loop_gives_502_too_many_redirects(fwd):
    start = time.monotonic()
    r = fwd.get("/api/loop")
    assert_error_json(r, 502, "too_many_redirects")
    assert time.monotonic() - start < 5
    assert len(fwd.main.records) <= REDIRECT_MAX + 1, fwd.evidence()


def test_follow_false_relays_the_3xx_with_its_location(fwd):
    to = fwd.main.url("/base/elsewhere")
    r = fwd.get(f"/nofollow/redirect?status=302&to={q(to)}")
    assert r.status == 302, str(r)
    assert r.header("Location") == to, str(r)
    assert r.json() == {"redirectTo": to}, str(r)
    only(fwd.main.records)


# --------------------------------------------------------------------------- bodies and framing


def test_chunked_upload_arrives_intact(fwd):
    pieces = [secrets.token_bytes(n) for n in (1, 17, 4096, 65536, 100_000, 3)]
    body = b"".join(pieces)
    chunks = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    raw = fwd.head("POST", "/api/upload", {"Transfer-Encoding": "chunked", "Connection": "close"})
    with fwd.proxy.connect(timeout=10) as s:
        s.sendall(raw)
        for i in range(0, len(chunks), 7000):  # dribble it in
            s.sendall(chunks[i:i + 7000])
        r = ResponseReader(s, timeout=10).read_response("POST")
    assert r.status == 200, str(r)
    want = hashlib.sha256(body).hexdigest()
    assert r.json()["sha256"] == want and r.json()["length"] == len(body), str(r)
    rec = only(fwd.main.records)
    assert (rec.body_length, rec.body_sha256, rec.complete) == (len(body), want, True), str(rec)


def test_content_length_upload_arrives_intact(fwd):
    body = secrets.token_bytes(3 * 1024 * 1024 + 5)
    r = fwd.request("PUT", "/api/upload", body=body, timeout=20)
    assert r.status == 200, str(r)
    want = hashlib.sha256(body).hexdigest()
    rec = only(fwd.main.records)
    assert (rec.method, rec.body_length, rec.body_sha256) == ("PUT", len(body), want), str(rec)


@pytest.mark.parametrize("chunked", [0, 1])
def test_download_arrives_intact(fwd, chunked):
    n = 5 * 1024 * 1024 + 123
    r = fwd.get(f"/api/download?bytes={n}&chunked={chunked}", timeout=20)
    assert r.status == 200, str(r)
    assert len(r.body) == n
    assert hashlib.sha256(r.body).hexdigest() == pattern_sha256(n)


def test_download_survives_a_client_that_stops_reading_for_a_while(fwd):
    # backpressure: the proxy must pause the upstream and resume it when the client reads again
    n = 8 * 1024 * 1024
    with fwd.proxy.connect(timeout=20) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(fwd.head("GET", f"/api/download?bytes={n}"))
        time.sleep(1.5)
        r = ResponseReader(s, timeout=20).read_response()
    assert r.status == 200, str(r)
    assert len(r.body) == n, f"got {len(r.body)} of {n} body bytes"
    assert hashlib.sha256(r.body).hexdigest() == pattern_sha256(n)


def test_upload_survives_an_upstream_that_stops_reading_for_a_while(fwd):
    body = secrets.token_bytes(6 * 1024 * 1024)
    r = fwd.request("POST", "/api/upload?pause_before_body=1.5", body=body, timeout=20)
    assert r.status == 200, str(r)
    rec = only(fwd.main.records)
    assert (rec.body_length, rec.body_sha256) == (len(body), hashlib.sha256(body).hexdigest()), str(rec)


def test_head_request_has_no_body_and_the_connection_stays_usable(fwd):
    with fwd.proxy.connect(timeout=10) as s:
        reader = ResponseReader(s, timeout=10)
        s.sendall(fwd.head("HEAD", "/api/echo"))
        r = reader.read_response("HEAD")
        assert r.status == 200, str(r)
        s.sendall(fwd.head("GET", "/api/status?code=200"))
        r2 = reader.read_response("GET")
        assert r2.status == 200 and r2.json() == {"status": 200}, \
            f"the response after HEAD is garbled (a body was sent for HEAD?):\n{r2}"
    assert [x.method for x in fwd.main.records] == ["HEAD", "GET"], fwd.evidence()


@pytest.mark.parametrize("code", [204, 304])
def test_204_and_304_pass_without_a_body(fwd, code):
    with fwd.proxy.connect(timeout=10) as s:
        reader = ResponseReader(s, timeout=10)
        s.sendall(fwd.head("GET", f"/api/status?code={code}"))
        r = reader.read_response("GET")
        assert r.status == code, str(r)
        assert r.header("Transfer-Encoding") is None, f"{code} with Transfer-Encoding:\n{r}"
        assert r.header("Content-Length") in (None, "0") or code == 304, str(r)
        s.sendall(fwd.head("GET", "/api/status?code=200"))
        r2 = reader.read_response("GET")
        assert r2.status == 200 and r2.json() == {"status": 200}, \
            f"the response after {code} is garbled (bytes after a bodiless response?):\n{r2}"


def test_body_over_max_body_bytes_is_refused_413_without_reaching_the_upstream(fwd):
    ex = fwd.raw(fwd.head("POST", "/api/upload", {"Content-Length": str(MAX_BODY_BYTES + 1)}), timeout=5)
    assert_error_json(ex.final, 413, "body_too_large")
    time.sleep(0.2)
    assert not [x for x in fwd.main.records if x.complete], fwd.evidence()
    # Its access log line carries the ID the client was sent, and the path (was: both empty).
    request_id = ex.final.header("X-Request-ID")
    assert request_id and json.loads(ex.final.body)["requestID"] == request_id
    lines = [e for e in fwd.proxy.log_events("request") if e.get("status") == 413]
    assert lines and lines[-1]["requestID"] == request_id and lines[-1]["path"] == "/api/upload", lines


def test_chunked_body_over_max_body_bytes_is_refused_413(fwd):
    piece = b"x" * (1024 * 1024)
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    with fwd.proxy.connect(timeout=10) as s:
        s.sendall(fwd.head("POST", "/api/upload", {"Transfer-Encoding": "chunked"}))
        try:
            for _ in range(MAX_BODY_BYTES // len(piece) + 2):
                s.sendall(chunk)
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the proxy may stop reading once over the limit
        r = ResponseReader(s, timeout=10).read_response("POST")
    assert_error_json(r, 413, "body_too_large")
    assert not [x for x in fwd.main.records if x.complete and x.body_length > MAX_BODY_BYTES], fwd.evidence()


# --------------------------------------------------------------------------- upstream failures


def test_upstream_down_gives_502_upstream_unreachable_fast(fwd):
    start = time.monotonic()
    r = fwd.get("/down/echo")
    elapsed = time.monotonic() - start
    assert_error_json(r, 502, "upstream_unreachable")
    assert elapsed < 1.0, f"502 took {elapsed:.2f}s"


def test_upstream_stall_gives_504_upstream_timeout_at_the_route_timeout(fwd):
    start = time.monotonic()
    r = fwd.get("/short/stall?seconds=6", timeout=10)
    elapsed = time.monotonic() - start
    assert_error_json(r, 504, "upstream_timeout")
    assert 0.9 <= elapsed <= 3.0, f"504 after {elapsed:.2f}s with timeoutSeconds 1"


def test_overlapping_head_timeouts_each_fire_at_their_own_route_timeout(start_proxy, main_upstream, tokens):
    """One sweep timer serves every transfer's head deadline: a later request with an earlier
    deadline (a 1.5 s route after a 10 s one) must move it earlier, and each overdue head must
    be found in its own time. 1.5 s, because libcurl's low-speed check (whole seconds, rounded
    up) would end the stall at 2 s on its own."""
    base = main_upstream.url("/base/")
    routes = [{"name": "long", "path": "/long/", "upstream": base, "credential": "access_token", "timeoutSeconds": 10},
              {"name": "brief", "path": "/brief/", "upstream": base, "credential": "access_token",
               "timeoutSeconds": 1.5}]
    proxy = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes), name="sweep")
    results: dict[str, tuple[float, object]] = {}

    def fetch(name: str, path: str) -> None:
        start = time.monotonic()
        r = proxy.get(path, timeout=15)
        results[name] = (time.monotonic() - start, r)

    threads = [threading.Thread(target=fetch, args=("long", "/long/stall?seconds=3"))]
    threads[0].start()
    time.sleep(0.3)
    for name in ("first", "second"):
        t = threading.Thread(target=fetch, args=(name, "/brief/stall?seconds=6"))
        t.start()
        threads.append(t)
        time.sleep(0.6)
    for t in threads:
        t.join(20)
    for name in ("first", "second"):
        elapsed, r = results[name]
        assert_error_json(r, 504, "upstream_timeout")
        assert 1.4 <= elapsed <= 1.85, f"{name}: 504 after {elapsed:.2f}s with timeoutSeconds 1.5"
    elapsed, r = results["long"]
    assert r.status == 200, f"the 10 s route's stall of 3 s was cut: {r}"
    assert elapsed >= 2.9, f"long: {elapsed:.2f}s"


# --------------------------------------------------------------------------- upstream connection reuse


def test_sequential_keepalive_requests_share_upstream_connections(fwd):
    n = 200
    with fwd.proxy.connect(timeout=10) as s:
        reader = ResponseReader(s, timeout=10)
        for i in range(n):
            s.sendall(fwd.head("GET", f"/api/echo?i={i}"))
            r = reader.read_response()
            assert r.status == 200, f"request {i}: {r}"
            assert not r.wants_close, f"request {i}: proxy closed the client connection:\n{r}"
    recs = fwd.main.records
    assert len(recs) == n
    conns = {x.connection for x in recs}
    print(f"\n{n} sequential requests used {len(conns)} upstream connection(s) "
          f"({fwd.main.connections_accepted} accepted)")
    assert len(conns) <= 2, f"{n} sequential requests used {len(conns)} upstream connections"


def test_concurrent_clients_share_upstream_connections(make_fwd):
    workers, clients, per_client = 2, 50, 10
    fwd = make_fwd(workers=workers)
    failures: list[str] = []
    barrier = threading.Barrier(clients)

    def client(c: int) -> None:
        try:
            with fwd.proxy.connect(timeout=20) as s:
                reader = ResponseReader(s, timeout=20)
                barrier.wait(timeout=20)
                for i in range(per_client):
                    s.sendall(fwd.head("GET", f"/api/echo?c={c}&i={i}"))
                    r = reader.read_response()
                    if r.status != 200 or r.json()["target"] != f"/base/echo?c={c}&i={i}":
                        failures.append(f"client {c} request {i}: {r}")
                        return
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"client {c}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures, "\n".join(failures[:10])
    recs = fwd.main.records
    assert len(recs) == clients * per_client
    conns = {x.connection for x in recs}
    print(f"\n{clients}x{per_client} concurrent requests used {len(conns)} upstream connection(s) "
          f"({fwd.main.connections_accepted} accepted)")
    assert len(conns) <= workers * clients, \
        f"{clients * per_client} requests used {len(conns)} upstream connections"


# --------------------------------------------------------------------------- token rotation and availability


@pytest.mark.parametrize("how", ["in_place", "atomic_rename"])
def test_rotated_token_file_is_used_by_the_next_requests(fwd, how):
    old = fwd.tokens.access
    assert fwd.get("/api/echo").status == 200
    assert only(fwd.main.records).header("Authorization") == f"Bearer {old}"
    new = "at-" + secrets.token_hex(20)  # same length as the old one
    fwd.tokens.rotate_access(new, atomic=(how == "atomic_rename"))
    rotated_at = time.monotonic()
    seen = []
    while time.monotonic() - rotated_at < 3.0:
        r = fwd.get("/api/echo")
        assert r.status == 200, str(r)
        value = fwd.main.records[-1].header("Authorization")
        seen.append(value)
        if value == f"Bearer {new}":
            break
        time.sleep(0.05)
    took = time.monotonic() - rotated_at
    assert seen and seen[-1] == f"Bearer {new}", \
        f"3 s after rotation the upstream still got {seen[-1]!r} ({len(seen)} requests)"
    assert set(seen) <= {f"Bearer {old}", f"Bearer {new}"}, f"unexpected values during rotation: {set(seen)}"
    print(f"\nnew token in use {took:.2f}s after rotation ({how})")
    for _ in range(5):
        assert fwd.get("/api/echo").status == 200
        rec = fwd.main.records[-1]
        assert rec.header_all("Authorization") == [f"Bearer {new}"], str(rec)
        assert rec.header_all("X-Authorization") == [f"Bearer {new}"], str(rec)


@pytest.mark.parametrize("missing", ["access", "id"])
def test_token_file_removed_while_running_gives_503_credentials_unavailable(fwd, missing):
    # (a token file missing at startup is a config error: `serve` exits 1 naming the file)
    assert fwd.get("/api/echo").status == 200 and fwd.get("/jwt/echo").status == 200
    path, route = ((fwd.tokens.access_path, "/api/echo") if missing == "access"
                   else (fwd.tokens.id_path, "/jwt/echo"))
    saved = path.read_text()
    path.unlink()
    fwd.main.clear()
    deadline = time.monotonic() + 3.0
    while True:
        before = len(fwd.main.records)
        r = fwd.get(route)
        if r.status != 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert_error_json(r, 503, "credentials_unavailable")
    assert len(fwd.main.records) == before, f"the 503 request reached the upstream:\n{fwd.evidence()}"
    assert fwd.get("/open/echo").status == 200, "a credential-free route stopped working"
    path.write_text(saved)
    deadline = time.monotonic() + 3.0
    r = fwd.get(route)
    while r.status != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
        r = fwd.get(route)
    assert r.status == 200, f"token file restored, route still failing:\n{r}"
    token = fwd.tokens.access if missing == "access" else fwd.tokens.id
    assert fwd.main.records[-1].header_all("Authorization") == [f"Bearer {token}"]


def test_removing_the_id_token_file_leaves_access_token_routes_working(fwd):
    # The two tokens are separate secret sources: losing the id_token must not take the
    # access token (or the routes that only need it) down with it.
    assert fwd.get("/api/echo").status == 200 and fwd.get("/jwt/echo").status == 200
    fwd.tokens.id_path.unlink()
    deadline = time.monotonic() + 3.0
    while fwd.get("/jwt/echo").status == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fwd.get("/jwt/echo").status == 503, "id token file removed 3 s ago, /jwt/ still served"
    fwd.main.clear()
    r = fwd.get("/api/echo")
    assert r.status == 200, f"access token file untouched, but /api/ now answers:\n{r}"
    assert only(fwd.main.records).header_all("Authorization") == [f"Bearer {fwd.tokens.access}"]


# --------------------------------------------------------------------------- path safety


@pytest.mark.parametrize("path", [
    "/api/../x",
    "/api/%2e%2e/x",
    "/api/%2E%2E/x",
    "/api/.%2e/x",
    "/api/%2e./x",
    "/api/./x",
    "/api/%2e/x",
    "/api/x/../../etc/passwd",
    "/api/x/..",
    "/api/x/%2e%2e?q=1",
])
def test_dot_segment_paths_are_refused_400_invalid_path(fwd, path):
    ex = fwd.raw(fwd.head("GET", path, {"Connection": "close"}), timeout=5)
    assert ex.final is not None, f"{path}: {ex.outcome} {ex.data[:300]!r}"
    assert_error_json(ex.final, 400, "invalid_path")
    assert not fwd.main.records, f"{path} reached the upstream:\n{fwd.evidence()}"
