"""Redirect chains at the credential boundary (docs/security.md), end to end: a chain that
left the credential hosts stays uncredentialed, cross-host hops are followed only as GET/HEAD,
and relative Locations have their dot segments removed before the hop.
"""

from __future__ import annotations

import pytest

from proxy import base_config
from test_forwarding import (assert_error_json, fwd, make_fwd, only, q, static_provider, tokens,  # noqa: F401 (fixtures)
                             unused_port)


def _assert_uncredentialed(rec, fwd):
    for name in ("authorization", "x-authorization"):
        assert name not in rec.header_names(), f"{name} sent after the chain left the credential hosts:\n{rec}"
    for secret in fwd.tokens.all:
        assert all(secret not in v for _, v in rec.headers), str(rec)


# --------------------------------------------------------------------------- 6. leave and return


@pytest.mark.parametrize("status", [302, 307])
def test_chain_that_left_the_credential_hosts_stays_uncredentialed_when_it_returns(fwd, status):
    back = fwd.main.url("/base/admin/delete-everything")
    via_foreign = fwd.foreign.url(f"/redirect?status={status}&to={q(back)}")
    r = fwd.get(f"/api/redirect?status={status}&to={q(via_foreign)}")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    recs = fwd.main.records
    assert [x.path for x in recs] == ["/base/redirect", "/base/admin/delete-everything"], fwd.evidence()
    assert recs[0].header("authorization") == f"Bearer {fwd.tokens.access}"
    _assert_uncredentialed(only(fwd.foreign.records, "on foreign"), fwd)
    _assert_uncredentialed(recs[1], fwd)


# --------------------------------------------------------------------------- 7. bodies to foreign hosts


@pytest.mark.parametrize("method,status", [("POST", 307), ("POST", 308), ("PUT", 301), ("DELETE", 302),
                                           ("PATCH", 307)])
def test_cross_host_redirect_of_a_request_with_a_body_is_relayed_not_followed(fwd, method, status):
    to = fwd.foreign.url("/collect")
    body = b'{"secret-form": "value"}'
    r = fwd.request(method, f"/api/redirect?status={status}&to={q(to)}", body=body)
    assert r.status == status, f"{r}\n{fwd.evidence()}"
    assert r.header("location") == to
    assert not fwd.foreign.records, f"the body went to a foreign host:\n{fwd.evidence()}"


def test_route_may_opt_in_to_following_every_method_across_hosts(start_proxy, main_upstream, foreign_upstream,
                                                                  tokens):
    routes = [{"name": "any", "path": "/any/", "upstream": main_upstream.url("/base/"), "credential": "access_token",
               "redirects": {"crossHostMethods": "all"}, "timeoutSeconds": 10}]
    server = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes), name="any")
    to = foreign_upstream.url("/collect")
    r = server.request("POST", f"/any/redirect?status=307&to={q(to)}", body=b"abc")
    assert r.status == 200, str(r)
    hop = only(foreign_upstream.records, "on foreign")
    assert (hop.method, hop.body_length) == ("POST", 3), str(hop)
    assert "authorization" not in hop.header_names(), str(hop)


def test_cross_host_post_redirected_by_302_is_followed_as_get_without_body(fwd):
    to = fwd.foreign.url("/after-post")
    r = fwd.request("POST", f"/api/redirect?status=302&to={q(to)}", body=b"form=1")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    hop = only(fwd.foreign.records, "on foreign")
    assert (hop.method, hop.body_length) == ("GET", 0), str(hop)


def test_same_host_307_post_still_replays_method_and_body(fwd):
    to = fwd.main.url("/base/upload")
    r = fwd.request("POST", f"/api/redirect?status=307&to={q(to)}", body=b"abc")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    assert [(x.method, x.path, x.body_length) for x in fwd.main.records] == [
        ("POST", "/base/redirect", 3), ("POST", "/base/upload", 3)]


# --------------------------------------------------------------------------- 8. relative Locations: query, fragment, dot segments


def test_relative_location_with_a_url_in_its_query_or_a_fragment_is_followed_on_the_upstream(fwd):
    """Was: a "://" anywhere made a Location absolute, and any "#" made it unparseable: both were
    relayed to the app, which could only meet them with a 404 from the proxy."""
    for location, path, query in (("/base/next?return_to=https://example.com/", "/base/next", "return_to=https://example.com/"),
                                  ("/base/next#section", "/base/next", "")):
        fwd.main.clear()
        r = fwd.get(f"/api/a/redirect?status=302&to={q(location)}")
        assert r.status == 200, f"{location}: {r}\n{fwd.evidence()}"
        recs = fwd.main.records
        assert [(x.path, x.query) for x in recs][1:] == [(path, query)], fwd.evidence()
        assert "#" not in recs[1].target


@pytest.mark.parametrize("location,expected", [
    ("../../../x", "/x"),
    ("../sibling", "/base/sibling"),
    ("./here/./there/../end", "/base/a/here/end"),
    ("/base/a/../../top", "/top"),
])
def test_relative_location_dot_segments_are_removed_before_the_hop(fwd, location, expected):
    r = fwd.get(f"/api/a/redirect?status=302&to={q(location)}")
    assert r.status == 200, f"{r}\n{fwd.evidence()}"
    recs = fwd.main.records
    assert [x.path for x in recs] == ["/base/a/redirect", expected], fwd.evidence()
    assert recs[1].header("authorization") == f"Bearer {fwd.tokens.access}"


# --------------------------------------------------------------------------- redirects back to the proxy


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_redirect_from_a_foreign_host_back_to_the_proxy_is_refused_not_credentialed_by_a_route(fwd, host):
    """Was: a foreign host redirected to the proxy's own listener, the
    hop came back in as a new request, and its route credentialed it, the foreign host choosing
    the path and query. A hop that would connect to one of the proxy's listeners is refused: 508."""
    back = f"http://{host}:{fwd.proxy.port}/api/admin/delete-everything?confirm=1"
    via_foreign = fwd.foreign.url(f"/redirect?status=302&to={q(back)}")
    r = fwd.get(f"/api/redirect?status=302&to={q(via_foreign)}")
    assert_error_json(r, 508, "loop_detected")
    assert [x.path for x in fwd.main.records] == ["/base/redirect"], fwd.evidence()
    assert len(fwd.foreign.records) == 1, fwd.evidence()


def test_upstream_redirecting_to_the_proxy_itself_ends_at_once(fwd):
    """Was: each pass through the proxy started a new chain with its own redirect count, so an
    upstream answering with the proxy's own address opened connections until maxConnections."""
    loop = f"http://127.0.0.1:{fwd.proxy.port}/api/redirect?status=302&to=again"
    r = fwd.get(f"/api/redirect?status=302&to={q(loop)}")
    assert_error_json(r, 508, "loop_detected")
    assert len(fwd.main.records) == 1, fwd.evidence()
    assert fwd.get("/api/ok").status == 200, "the proxy serves on"


def test_route_whose_upstream_is_the_proxys_own_listener_is_a_508(start_proxy, tokens):
    port = unused_port()
    routes = [{"name": "self", "path": "/", "upstream": f"http://localhost:{port}/", "credential": "access_token"}]
    server = start_proxy(config=base_config(None, provider=static_provider(tokens), routes=routes,
                                            listen=[f"127.0.0.1:{port}"]), name="self")
    assert_error_json(server.request("GET", "/anything"), 508, "loop_detected")
    assert server.request("GET", "/_platform/health").status == 200
