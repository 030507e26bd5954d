"""Credential lifecycle against a real OAuth 2 / OIDC server (docs/login.md
and the control endpoints): the browser login (PKCE) driven by following the
redirects, the callback's refusals, the token store (0600, kept across a restart, a corrupt
file moved aside), logout with RFC 7009 revocation, userinfo, readiness, the SSE state
stream and the demo login. Refresh, 401 retry and outages: test_credentials_refresh.py;
device flow, client credentials and the wait gate: test_credentials_grants.py.

Every test ends by grepping each proxy's stderr (debug level) for every secret the IdP
issued.

    cd Tests/Integration && python3 -m pytest -q test_credentials*.py
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from urllib.parse import parse_qs, urlsplit

from credentials_support import (  # noqa: F401  (fixtures)
    USER_SUBJECT,
    EventStream,
    assert_no_secrets_logged,
    browser_login,
    file_mode,
    http_call,
    idp_factory,
    launch,
    login,
    proxy_debug_logs,
    stored_tokens,
    wait_until,
)
from upstream import Upstream

AUTH_KEYS = {"state", "loggedIn", "expiresAt", "subject", "lastError"}
# /_platform/auth adds every provider's fields under "providers"; each SSE event names its provider.
AUTH_ANSWER_KEYS = AUTH_KEYS | {"providers"}
EVENT_KEYS = AUTH_KEYS | {"provider"}


def issued(idp, kind):
    return [i["value"] for i in idp.control.issued(kind)]


# --------------------------------------------------------------------------- login


def test_pkce_login_by_following_redirects_signs_in_and_stores_tokens(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)
    logged_out = {"state": "logged_out", "loggedIn": False, "expiresAt": None, "subject": None, "lastError": None}
    # The only provider is named "default"; its fields also appear under "providers" with its grant.
    assert p.auth() == {**logged_out, "providers": {"default": {**logged_out, "grant": "authorization_code"}}}
    r = p.call("/api/before")
    assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r

    before = time.time()
    t = browser_login(p)
    # the authorization request: code flow, PKCE S256, a random state, our redirect URI
    auth_url = urlsplit(t.authorize_url)
    assert f"{auth_url.scheme}://{auth_url.netloc}{auth_url.path}" == idp.issuer + "/authorize"
    q = t.authorize_query
    assert q["response_type"] == "code"
    assert q["client_id"] == "public-client"
    assert q["redirect_uri"] == f"http://127.0.0.1:{p.port}/_platform/callback"
    assert q["code_challenge_method"] == "S256"
    assert len(q["code_challenge"]) == 43, q  # base64url(SHA-256), unpadded
    assert len(q.get("state", "")) >= 16, q
    assert set(q["scope"].split()) == {"openid", "profile", "email", "offline_access", "read"}
    assert (t.login_reply.header("cache-control") or "").lower() == "no-store"
    # the IdP sent the browser back with a code and the same state
    cb = {k: v[0] for k, v in parse_qs(urlsplit(t.callback_url).query).items()}
    assert cb["state"] == q["state"] and cb.get("code"), t.callback_url
    # the callback page
    assert t.callback_reply.status == 200, t.callback_reply
    assert "text/html" in t.callback_reply.header("content-type")
    assert b"signed in" in t.callback_reply.body.lower(), t.callback_reply.body
    # the state apps see
    a = p.auth()
    assert set(a) == AUTH_ANSWER_KEYS, a
    assert a["state"] == "logged_in" and a["loggedIn"] is True, a
    assert a["subject"] == USER_SUBJECT, a
    assert a["lastError"] is None, a
    assert before + 120 - 5 <= a["expiresAt"] <= time.time() + 120 + 5, a
    # the IdP saw one code exchange (S256 verified by Authlib), nothing else
    c = idp.control
    assert c.token_results("authorization_code") == {"ok": 1}
    assert c.token_calls() == 1
    # tokens.json: mode 0600, exactly what the IdP issued
    assert file_mode(p.tokens_path) == 0o600
    stored = stored_tokens(p)
    assert stored["access_token"] == issued(idp, "access_token")[-1]
    assert stored["refresh_token"] == issued(idp, "refresh_token")[-1]
    assert stored["id_token"] == issued(idp, "id_token")[-1]
    assert not p.tokens_path.with_name("tokens.json.tmp").exists()
    # the credential reaches the upstream
    r = p.call("/api/after?x=1")
    assert r.status == 200, r
    body = r.json()
    assert body["path"] == "/api/after" and body["query"] == "x=1" and body["user"]["pennkey"] == USER_SUBJECT
    # nothing secret in what apps are shown
    shown = json.dumps(a) + t.callback_reply.body.decode()
    assert not [s for s in c.secrets() if s in shown]
    assert_no_secrets_logged(idp, [p])


def test_callback_refuses_unknown_state_replay_and_reports_idp_error(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    p = launch(start_proxy, idp, tmp_path)
    # a state this proxy never issued
    r = p.call("/_platform/callback?code=abc&state=not-ours")
    assert r.status == 400, r
    assert b"state" in r.body.lower(), r.body
    assert "text/html" in r.header("content-type")
    # the IdP denies: the page says so, in words
    idp.control.deny_next(1)
    t = browser_login(p)
    assert "error=access_denied" in t.callback_url, t.callback_url
    assert t.callback_reply.status == 400, t.callback_reply
    assert b"access_denied" in t.callback_reply.body, t.callback_reply.body
    assert p.auth()["state"] == "logged_out"
    # a good login, then the same callback URL again (the state is single use)
    t = browser_login(p)
    assert t.callback_reply.status == 200, t.callback_reply
    again = http_call(t.callback_url)
    assert again.status == 400, again
    assert idp.control.token_calls("authorization_code") == 1, "the replayed code must not reach the IdP"
    assert p.auth()["state"] == "logged_in"
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- the token store


def test_restart_keeps_the_login(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    first = login(p)
    stored = stored_tokens(p)
    assert p.server.stop() == 0
    q = launch(start_proxy, idp, tmp_path, name="restarted", state_dir=p.state_dir, port=p.port, refresh_before=30)
    a = q.wait_state("logged_in", timeout=5)
    assert a["subject"] == USER_SUBJECT and a["expiresAt"] == first["expiresAt"], (first, a)
    r = q.call("/api/after-restart")
    assert r.status == 200, r
    c = idp.control
    assert c.token_calls() == 1, f"a restart must not need a new login or refresh: {c.counters()}"
    assert stored_tokens(q) == stored
    assert file_mode(q.tokens_path) == 0o600
    assert q.call("/_platform/ready").status == 200
    assert_no_secrets_logged(idp, [p, q])


def test_restart_with_expired_access_token_refreshes_and_serves(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=2)
    p = launch(start_proxy, idp, tmp_path, refresh_before=0.5)
    a = login(p)
    stored = stored_tokens(p)
    assert p.server.stop() == 0
    time.sleep(max(0.0, a["expiresAt"] - time.time()) + 1.0)  # dead now (expiresAt is rounded)
    q = launch(start_proxy, idp, tmp_path, name="restarted", state_dir=p.state_dir, port=p.port, refresh_before=0.5)
    r = q.call("/api/after-expired-restart")
    assert r.status == 200, r
    a = q.auth()
    assert a["state"] in ("logged_in", "refreshing") and a["subject"] == USER_SUBJECT, a
    c = idp.control
    assert c.token_results("refresh_token").get("ok", 0) >= 1, c.token_call_log()
    assert c.api_counters().get("unauthorized", 0) == 0, "the dead token was sent upstream"
    stored_tokens(q, lambda s: s["refresh_token"] != stored["refresh_token"])  # the rotated one is kept
    assert_no_secrets_logged(idp, [p, q])


def test_restart_while_idp_unreachable_keeps_the_login(start_proxy, idp_factory, tmp_path):
    """docs/login.md: a restart keeps the login; the auth server unreachable keeps the login (state
    logged_in, lastError set). Both at once: the stored access token is valid for minutes,
    the API upstream is up, only the IdP is unreachable while the proxy restarts."""
    idp = idp_factory(access_ttl=300)
    up = Upstream("api-host").start()
    try:
        routes = [{"name": "echo", "path": "/echo/", "upstream": up.url("/base/"), "credential": "access_token",
                   "retryOn401": True}]
        p = launch(start_proxy, idp, tmp_path, routes=routes, refresh_before=30)
        first = login(p)
        stored = stored_tokens(p)
        assert p.server.stop() == 0
        idp.control.offline()
        q = launch(start_proxy, idp, tmp_path, name="restarted", routes=routes, state_dir=p.state_dir,
                   port=p.port, refresh_before=30, wait_discovery=False)
        wait_until(lambda: q.server.log_events("provider_discovery_failed"), timeout=5,
                   what="the failed discovery at start")
        a = q.auth()
        r = q.call("/echo/while-idp-down")
        assert a["state"] == "logged_in" and a["loggedIn"] is True, (
            f"restart with the IdP unreachable: the stored login (expires in "
            f"{first['expiresAt'] - time.time():.0f} s) is reported as {a}; /echo/ answered {r}")
        assert a["subject"] == USER_SUBJECT, a
        assert r.status == 200, r
        assert up.records[-1].header("Authorization") == "Bearer " + stored["access_token"]
        assert q.tokens_path.exists()
        idp.control.online()
        wait_until(lambda: q.server.log_events("provider_discovered"), timeout=8, what="discovery once back")
        a = q.wait_state("logged_in", timeout=3)
        assert a["lastError"] is None, a
    finally:
        up.stop()
    assert_no_secrets_logged(idp, [p, q])


def test_corrupt_token_store_is_moved_aside_and_treated_as_logged_out(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    garbage = b'{"access_token": 42, "truncated'
    (state / "tokens.json").write_bytes(garbage)
    p = launch(start_proxy, idp, tmp_path, state_dir=state)
    assert p.auth()["state"] == "logged_out"
    aside = sorted(state.glob("tokens.json.corrupt-*"))
    assert len(aside) == 1, list(state.iterdir())
    assert aside[0].read_bytes() == garbage, "the corrupt file is kept as it was"
    assert not (state / "tokens.json").exists()
    assert p.server.log_events("token_store_corrupt"), "the corrupt store is logged"
    r = p.call("/api/x")
    assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
    assert p.call("/_platform/ready").status == 503
    login(p)
    assert stored_tokens(p)["access_token"] == issued(idp, "access_token")[-1]
    assert p.call("/api/x").status == 200
    assert aside[0].exists()
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- logout


def test_logout_revokes_refresh_token_at_idp_and_deletes_store(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    p = launch(start_proxy, idp, tmp_path)
    login(p)
    refresh_token = stored_tokens(p)["refresh_token"]
    r = p.call("/_platform/logout", method="POST")
    assert r.status == 200, r
    assert r.json().get("state") == "logged_out", r
    revs = idp.control.revocations()
    assert [v["token"] for v in revs] == [refresh_token], revs
    assert revs[0]["status"] == 200 and revs[0]["revoked"] == "refresh_token", revs
    assert revs[0]["client_id"] == "public-client", revs
    rec = [t for t in idp.control.tokens() if t["refresh_token"] == refresh_token][0]
    assert rec["refresh_live"] is False and rec["access_live"] is False, rec
    assert not p.tokens_path.exists(), list(p.state_dir.iterdir())
    a = p.auth()
    assert a["state"] == "logged_out" and a["loggedIn"] is False and a["subject"] is None, a
    r = p.call("/api/after-logout")
    assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
    assert idp.control.api_counters().get("calls", 0) == 0, "a gated request must not reach the upstream"
    assert p.call("/_platform/ready").status == 503
    assert_no_secrets_logged(idp, [p])


def test_logout_clears_store_even_when_revocation_fails(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    p = launch(start_proxy, idp, tmp_path)
    login(p)
    idp.control.down(status=503, endpoints=["revocation"])
    r = p.call("/_platform/logout", method="POST")
    assert r.status == 200, r
    assert not p.tokens_path.exists()
    assert p.auth()["state"] == "logged_out"
    assert idp.control.counters()["down_rejections"].get("revocation") == 1
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- userinfo and ready


def test_userinfo_relays_the_providers_userinfo(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    p = launch(start_proxy, idp, tmp_path)
    before = p.call("/_platform/userinfo")
    assert before.status >= 400 and before.json().get("error"), before
    login(p)
    r = p.call("/_platform/userinfo")
    assert r.status == 200, r
    direct = http_call(idp.issuer + "/userinfo",
                       headers={"Authorization": "Bearer " + stored_tokens(p)["access_token"]})
    assert direct.status == 200
    assert r.json() == direct.json(), (r.json(), direct.json())
    assert r.json()["sub"] == "user-1" and r.json()["pennkey"] == USER_SUBJECT
    assert idp.control.endpoint_calls("userinfo") == 2
    assert_no_secrets_logged(idp, [p])


def test_ready_is_503_until_discovery_and_login_then_200(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    idp.control.down(status=503, endpoints=["discovery"])
    p = launch(start_proxy, idp, tmp_path, wait_discovery=False)
    r = wait_until(lambda: (lambda x: x if x.status == 503 and b"discovery" in x.body.lower() else None)(
        p.call("/_platform/ready")), timeout=3, what="ready 503 naming the failed discovery")
    assert r.json()["status"] == "not_ready" and r.json()["reason"], r
    # while discovery fails, a login cannot start: it says why instead of redirecting nowhere
    r = p.call("/_platform/login")
    assert r.status != 302 and r.json().get("error"), r
    idp.control.up()
    # the discovery is retried with backoff (1 s, 2 s ...): ready now waits only for a login
    r = wait_until(lambda: (lambda x: x if b"discovery" not in x.body.lower() else None)(
        p.call("/_platform/ready")), timeout=8, what="discovery retried after the IdP came back")
    assert r.status == 503 and b"logged" in r.body.lower(), r
    assert idp.control.endpoint_calls("discovery") >= 2
    login(p)
    r = p.call("/_platform/ready")
    assert r.status == 200, r
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- SSE


def test_auth_events_stream_shows_each_transition(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path)
    es = EventStream(p)
    try:
        es.wait_state("logged_out", timeout=5)
        assert b"text/event-stream" in es.head.lower(), es.head
        current = {k: v for k, v in p.auth().items() if k != "providers"}
        assert es.events[0] == {**current, "provider": "default"}, "the event at connect is the current state"

        login(p)
        es.wait_state("logged_in")
        # a refresh (the upstream refuses the expired token, the proxy refreshes and retries)
        n = len(es.events)
        idp.control.expire_all()
        assert p.call("/api/refresh-me").status == 200
        es.wait_for(lambda ev: [e["state"] for e in ev[n:]][-2:] == ["refreshing", "logged_in"], what="refreshing → logged_in")
        # a refused refresh
        n = len(es.events)
        idp.control.fail_refresh(1)
        idp.control.expire_all()
        assert p.call("/api/refused").status == 401
        es.wait_state("awaiting_authorization", after=n)
        # logged in again, then logged out
        n = len(es.events)
        login(p)
        es.wait_state("logged_in", after=n)
        n = len(es.events)
        assert p.call("/_platform/logout", method="POST").status == 200
        es.wait_state("logged_out", after=n)

        states = es.states()
        dedup = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
        assert dedup == ["logged_out", "logged_in", "refreshing", "logged_in", "refreshing",
                         "awaiting_authorization", "logged_in", "logged_out"], states
        for e in es.events:
            assert set(e) == EVENT_KEYS, e
            assert e["loggedIn"] == (e["state"] in ("logged_in", "refreshing")), e
        awaiting = [e for e in es.events if e["state"] == "awaiting_authorization"][0]
        assert awaiting["lastError"] and "invalid_grant" in awaiting["lastError"], awaiting
        assert es.raw.count(b"event: state\ndata: {") == len(es.events), es.raw[:500]
        assert not [s for s in idp.control.secrets() if s.encode() in es.raw], "a secret on the event stream"
    finally:
        es.close()
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- demo login


def unsigned_jwt(claims: dict) -> str:
    def b64(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}."


def test_demo_login_installs_configured_tokens(start_proxy, idp_factory, tmp_path, monkeypatch):
    idp = idp_factory()
    demo_access = "demo-access-" + secrets.token_hex(16)
    demo_id = unsigned_jwt({"sub": "demo-sub", "pennkey": "demo-reviewer", "exp": int(time.time()) + 600})
    monkeypatch.setenv("PP_TEST_DEMO_ACCESS", demo_access)
    up = Upstream("demo").start()
    try:
        routes = [
            {"name": "echo", "path": "/echo/", "upstream": up.url("/base/"), "credential": "access_token"},
            {"name": "jwt", "path": "/jwt/", "upstream": up.url("/base/"), "credential": "jwt"},
        ]
        p = launch(start_proxy, idp, tmp_path, routes=routes, provider_extra={
            "demo": {"accessToken": {"env": "PP_TEST_DEMO_ACCESS"}, "idToken": demo_id, "expiresInSeconds": 600}})
        r = p.call("/echo/before")
        assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
        start = time.time()
        r = p.call("/_platform/login/demo", method="POST")
        assert r.status == 200, r
        a = r.json()
        assert a["state"] == "logged_in" and a["loggedIn"] is True and a["subject"] == "demo-reviewer", a
        assert start + 590 <= a["expiresAt"] <= time.time() + 610, a
        assert p.auth()["state"] == "logged_in"
        assert p.call("/echo/x").status == 200
        assert p.call("/jwt/y").status == 200
        recs = up.records
        assert recs[-2].header("Authorization") == "Bearer " + demo_access
        assert recs[-1].header("Authorization") == "Bearer " + demo_id
        assert idp.control.token_calls() == 0, "a demo login does not talk to the IdP"

        # without provider.demo there is no demo login
        q = launch(start_proxy, idp, tmp_path, name="nodemo", routes=routes)
        r = q.call("/_platform/login/demo", method="POST")
        assert r.status == 404 and r.json()["error"] == "login_unavailable", r
        assert q.auth()["state"] == "logged_out"
    finally:
        up.stop()
    assert_no_secrets_logged(idp, [p, q], extra=[demo_access, demo_id])
