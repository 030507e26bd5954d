"""Requests that would escape their route or come from another site (docs/security.md),
end to end against the real binary: encoded separators, ``Sec-Fetch-Site``, method-override
fields naming TRACE, absolute-form targets with user information, HTTP/1.0 without Host, and
what ``mock_not_found`` may disclose. A refused request must never reach the upstream.
"""

from __future__ import annotations

import time

import pytest

from proxy import base_config, build_request, write_mock_dir
from test_forwarding import assert_error_json, make_tokens, static_provider


def routes(upstream, mock_dir) -> list[dict]:
    base = upstream.url("/v1/")
    return [
        {"name": "files", "path": "/files/", "upstream": base, "credential": "access_token", "timeoutSeconds": 10},
        {"name": "objects", "path": "/objects/", "upstream": base, "credential": "access_token",
         "encodedSlashes": "forward", "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": base, "credential": "none", "timeoutSeconds": 10},
        {"name": "m", "path": "/m/", "mock": {"directory": str(mock_dir), "mode": "replay"}},
    ]


@pytest.fixture
def boundary(start_proxy, main_upstream, tmp_path):
    tokens = make_tokens(tmp_path / "tokens")
    mock_dir = write_mock_dir(tmp_path / "mock", {"a": {"mock": "a"}})
    server = start_proxy(config=base_config(None, provider=static_provider(tokens),
                                            routes=routes(main_upstream, mock_dir)), name="boundary")
    server.upstream = main_upstream
    server.tokens = tokens
    server.mock_dir = mock_dir
    return server


def raw(server, method: str, target: str, headers: dict, version: str = "HTTP/1.1"):
    hdrs = dict(headers)
    hdrs.setdefault("Connection", "close")
    ex = server.exchange(build_request(method, target, hdrs, version=version), timeout=5.0)
    assert ex.final is not None, f"{method} {target}: {ex.outcome} {ex.data[:300]!r}"
    return ex.final


def assert_never_forwarded(server):
    time.sleep(0.1)
    assert not server.upstream.records, server.upstream.dump()


# --------------------------------------------------------------------------- 1. encoded separators


@pytest.mark.parametrize("path", [
    "/files/..%2fsecret.json", "/files/..%2Fsecret.json", "/files/%2e%2e%2fsecret.json", "/files/.%2e%2fsecret.json",
    "/files/x/..%2f..%2fsecret.json", "/files/a%2fb", "/files/a%5cb", "/files/..%5C..%5Csecret", "/files/a%00.json",
    # A raw backslash is a separator to WHATWG URL parsers and IIS; "..;" is ".." to Tomcat.
    "/files/..\\secret.json", "/files/x\\..\\..\\secret", "/files/..;/secret.json", "/files/.;x/secret.json",
    # What lenient upstreams decode further: twice-encoded, overlong UTF-8, IIS %u, fullwidth dots, a trailing space.
    "/files/%252e%252e/secret.json", "/files/..%252fsecret.json", "/files/%c0%ae%c0%ae/secret.json",
    "/files/%u002e%u002e/secret.json", "/files/%ef%bc%8e%ef%bc%8e/secret.json", "/files/..%20/secret.json",
], ids=lambda p: p.replace("/", "_"))
def test_refuses_encoded_slash_that_would_escape_the_route(boundary, path):
    r = raw(boundary, "GET", path, {"Host": boundary.host_header})
    assert_error_json(r, 400, "invalid_path")
    assert_never_forwarded(boundary)


def test_refuses_encoded_separators_on_routes_without_credentials_too(boundary):
    r = raw(boundary, "GET", "/open/..%2fsecret.json", {"Host": boundary.host_header})
    assert_error_json(r, 400, "invalid_path")
    assert_never_forwarded(boundary)


def test_forwards_encoded_slashes_verbatim_on_a_route_that_opts_in(boundary):
    r = raw(boundary, "GET", "/objects/bucket/a%2Fb%2fc.txt", {"Host": boundary.host_header})
    assert r.status == 200, str(r)
    assert boundary.upstream.records[0].target == "/v1/bucket/a%2Fb%2fc.txt"


@pytest.mark.parametrize("path", ["/objects/..%2fsecret", "/objects/x/%2e%2e%2F..%2fsecret", "/objects/a%00b",
                                  "/objects/..\\secret", "/objects/..;/secret"],
                         ids=lambda p: p.replace("/", "_"))
def test_opted_in_route_still_refuses_dot_segments_between_encoded_slashes_and_nul(boundary, path):
    r = raw(boundary, "GET", path, {"Host": boundary.host_header})
    assert_error_json(r, 400, "invalid_path")
    assert_never_forwarded(boundary)


def test_encoded_slashes_setting_is_validated(tmp_path):
    from proxy import run_cli
    import json
    cfg = base_config(None, routes=[{"name": "r", "path": "/r/", "upstream": "http://127.0.0.1:9/",
                                     "encodedSlashes": "decode"}])
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    out = run_cli("check-config", "--config", str(path))
    assert out.returncode == 1
    assert "routes[0].encodedSlashes" in out.stdout + out.stderr


# --------------------------------------------------------------------------- 2. cross-site requests


# (/_platform/health and /ready answer any caller, before every check: container probes.)
@pytest.mark.parametrize("path", ["/files/x", "/_platform/metrics", "/_platform/auth"],
                         ids=lambda p: p.replace("/", "_"))
def test_refuses_cross_site_request_without_origin(boundary, path):
    # What an <img src> or a link on another site makes a browser send: no Origin at all.
    r = raw(boundary, "GET", path, {"Host": boundary.host_header, "Sec-Fetch-Site": "cross-site",
                                    "Sec-Fetch-Mode": "no-cors"})
    assert_error_json(r, 403, "cross_site_request")
    assert_never_forwarded(boundary)


def test_refuses_cross_site_post_to_platform_endpoints(boundary):
    body = b'{"route":"m","mode":"off"}'
    r = raw(boundary, "POST", "/_platform/mock", {"Host": boundary.host_header, "Sec-Fetch-Site": "cross-site",
                                                  "Content-Length": str(len(body))})
    assert_error_json(r, 403, "cross_site_request")


def test_refuses_same_site_request_unless_its_origin_is_allowed(boundary):
    r = raw(boundary, "GET", "/files/x", {"Host": boundary.host_header, "Sec-Fetch-Site": "same-site"})
    assert_error_json(r, 403, "cross_site_request")
    r = raw(boundary, "GET", "/files/x", {"Host": boundary.host_header, "Sec-Fetch-Site": "same-site",
                                          "Origin": "http://localhost:3000"})
    assert r.status == 200, str(r)


@pytest.mark.parametrize("second, code", [(b"Sec-Fetch-Site: cross-site", "cross_site_request"),
                                          (b"origin: http://evil.example", "origin_not_allowed"),
                                          (b"Origin: null", "origin_not_allowed"),
                                          (b"Origin: evil.example", "origin_not_allowed")])
def test_a_second_sec_fetch_site_or_origin_cannot_hide_behind_a_first_that_passes(boundary, second, code):
    """Was: only the first line of each was read."""
    head = (f"GET /files/x HTTP/1.1\r\nHost: {boundary.host_header}\r\nSec-Fetch-Site: same-site\r\n"
            f"Origin: http://localhost:3000\r\nConnection: close\r\n").encode() + second + b"\r\n\r\n"
    ex = boundary.exchange(head, timeout=5.0)
    assert ex.final is not None, ex.data
    assert_error_json(ex.final, 403, code)
    assert_never_forwarded(boundary)


@pytest.mark.parametrize("site", ["same-origin", "none", "SAME-ORIGIN"])
def test_serves_same_origin_and_user_initiated_requests(boundary, site):
    r = raw(boundary, "GET", "/files/x", {"Host": boundary.host_header, "Sec-Fetch-Site": site})
    assert r.status == 200, str(r)
    assert boundary.upstream.records[0].header("authorization") == f"Bearer {boundary.tokens.access}"


def test_cross_site_requests_still_reach_routes_without_credentials(boundary):
    r = raw(boundary, "GET", "/open/x", {"Host": boundary.host_header, "Sec-Fetch-Site": "cross-site"})
    assert r.status == 200, str(r)


@pytest.mark.parametrize("target", ["/_platform/callback?code=x&state=y", "/_platform/login"])
def test_login_and_callback_accept_navigations_from_other_sites(boundary, target):
    # The IdP sends the browser back from its own site (the callback's `state` check guards
    # it), and an app's page sends the user to the login, which only redirects to the IdP.
    r = raw(boundary, "GET", target, {"Host": boundary.host_header, "Sec-Fetch-Site": "cross-site"})
    assert r.status != 403, str(r)


@pytest.mark.parametrize("name", ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"])
@pytest.mark.parametrize("value", ["TRACE", "track", " Trace "])
def test_refuses_method_override_naming_trace(boundary, name, value):
    r = raw(boundary, "POST", "/files/x", {"Host": boundary.host_header, name: value, "Content-Length": "0"})
    assert_error_json(r, 405, "method_not_allowed")
    assert_never_forwarded(boundary)


def test_forwards_method_override_naming_an_ordinary_method(boundary):
    r = raw(boundary, "POST", "/files/x", {"Host": boundary.host_header, "X-HTTP-Method-Override": "PATCH",
                                           "Content-Length": "0"})
    assert r.status == 200, str(r)


# --------------------------------------------------------------------------- 3. requests with no Host


@pytest.mark.parametrize("target,status,code", [
    # userinfo: the host check would read "127.0.0.1" while the request means evil.com
    ("http://127.0.0.1:80@evil.com/files/x", 400, "invalid_target"),
    # no Host header: the absolute-form authority is what allowedHosts must check
    ("http://evil.com/files/x", 403, "host_not_allowed"),
    # no Host and no authority: nothing to check at all
    ("/files/x", 400, "host_required"),
], ids=["userinfo", "foreign-authority", "no-host"])
def test_refuses_http10_request_whose_host_is_missing_or_disguised(boundary, target, status, code):
    r = raw(boundary, "GET", target, {}, version="HTTP/1.0")
    assert_error_json(r, status, code)
    assert_never_forwarded(boundary)


def test_serves_http10_request_without_host_on_routes_without_credentials(boundary):
    r = raw(boundary, "GET", "/open/x", {}, version="HTTP/1.0")
    assert r.status == 200, str(r)


# --------------------------------------------------------------------------- 5. mock_not_found


def test_mock_not_found_names_the_file_relative_to_the_mock_directory(boundary):
    r = boundary.get("/m/missing/file")
    body = assert_error_json(r, 404, "mock_not_found")
    assert "missing/file.json" in body["message"]
    assert str(boundary.mock_dir) not in body["message"], body
    assert "/tmp" not in body["message"], body
