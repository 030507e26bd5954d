"""Credential lifecycle, other grants and the wait gate (docs/login.md,
the control endpoints), against the Authlib test IdP: the RFC 8628 device flow (polling at the
server's interval, honouring slow_down), client_credentials (token at start, refreshed before
expiry, no login), and `gate.mode: "wait"` (held until a login, or answered 401 after
waitSeconds).

    cd Tests/Integration && python3 -m pytest -q test_credentials_grants.py
"""

from __future__ import annotations

import hashlib
import threading
import time

from credentials_support import (  # noqa: F401  (fixtures)
    USER_SUBJECT,
    assert_no_secrets_logged,
    browser_login,
    free_port,
    idp_factory,
    launch,
    provider_for,
    proxy_debug_logs,
    wait_until,
)


class Background:
    """One proxy request on a thread, so the test can act while it is held."""

    def __init__(self, proxy, path, method="GET", body=None, timeout=30):
        self.reply = None
        self.error = None
        self.started = time.monotonic()
        self.finished = None

        def run():
            try:
                self.reply = proxy.call(path, method=method, body=body, timeout=timeout)
            except Exception as e:  # noqa: BLE001
                self.error = e
            self.finished = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def join(self, timeout):
        self.thread.join(timeout)
        assert self.done, "the request is still held"
        assert self.error is None, self.error
        return self.reply

    @property
    def elapsed(self) -> float:
        return self.finished - self.started


# --------------------------------------------------------------------------- device flow


def test_device_flow_polls_at_interval_honours_slow_down_and_logs_in(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(device_interval=1)
    c = idp.control
    # enforce_interval: the IdP answers slow_down to polls faster than the interval;
    # slow_down_next: the first poll gets slow_down anyway (the proxy must add 5 s)
    c.switches(enforce_interval=True, slow_down_next=1)
    p = launch(start_proxy, idp, tmp_path)
    r = p.call("/_platform/login/device", method="POST")
    assert r.status == 200, r
    d = r.json()
    assert d["user_code"] and d["verification_uri"] == idp.issuer + "/device", d
    assert d["interval"] == 1 and d["expires_in"] > 0, d
    assert "device_code" not in d, "the device code is the proxy's secret"
    assert p.auth()["state"] == "logged_out"
    # the first poll (after one interval) is told to slow down
    wait_until(lambda: c.device_polls(), timeout=4, what="the first device poll")
    first = c.device_polls()[0]
    assert first["result"] == "slow_down", first
    c.approve_device(d["user_code"])
    a = p.wait_state("logged_in", timeout=10)
    assert a["subject"] == USER_SUBJECT, a
    polls = c.device_polls()
    results = [x["result"] for x in polls]
    assert results == ["slow_down", "approved"], polls
    gap = polls[1]["at"] - polls[0]["at"]
    assert gap >= 5.5, f"after slow_down the interval grows by 5 s (1 + 5); next poll came after {gap:.2f} s"
    assert gap < 9, f"poll after slow_down came only after {gap:.2f} s"
    assert c.token_results("device_code") == {"slow_down": 1, "ok": 1}
    r = p.call("/api/device")
    assert r.status == 200 and r.json()["user"]["pennkey"] == USER_SUBJECT, r
    assert p.tokens_path.exists()
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- client credentials


def test_tokens_living_shorter_than_refresh_before_expiry_are_refreshed_at_half_life_not_in_a_storm(
        start_proxy, idp_factory, tmp_path):
    """Was: with tokens of 30 s and the default 60 s lead, each
    new token was due for refresh already: ~80 token calls a second, for ever."""
    idp = idp_factory(access_ttl=30)
    port = free_port()
    prov = provider_for(idp, port, 60, grant="client_credentials")
    p = launch(start_proxy, idp, tmp_path, provider=prov, port=port)
    p.wait_state("logged_in", timeout=5)
    time.sleep(3)
    assert idp.control.token_calls("client_credentials") == 1, "refreshed again within 3 s of a 30 s token"
    assert p.call("/api/short").status == 200
    warnings = p.server.log_events("token_lifetime_short")
    assert len(warnings) == 1 and warnings[0]["refreshBeforeExpirySeconds"] == 60, warnings


def test_logout_of_a_client_credentials_provider_fetches_a_new_token_instead_of_gating_its_routes(
        start_proxy, idp_factory, tmp_path):
    """Was: after `logout` the service identity waited for a login it
    cannot have; its routes answered 401 awaiting_authorization until a restart."""
    idp = idp_factory(access_ttl=300)
    port = free_port()
    p = launch(start_proxy, idp, tmp_path, provider=provider_for(idp, port, 30, grant="client_credentials"), port=port)
    p.wait_state("logged_in", timeout=5)
    before = idp.control.token_calls("client_credentials")
    assert p.call("/_platform/logout", method="POST").status == 200
    p.wait_state("logged_in", timeout=5)
    assert idp.control.token_calls("client_credentials") == before + 1
    assert p.call("/api/after-logout").status == 200


def test_client_credentials_fetches_at_start_and_refreshes_before_expiry(start_proxy, idp_factory, tmp_path, monkeypatch):
    ttl, lead = 3, 1  # a lead of at most half the token's life: every 2 s
    idp = idp_factory(access_ttl=ttl)
    monkeypatch.setenv("PP_TEST_CLIENT_SECRET", idp.confidential_client_secret)
    # the client secret from the environment
    port = free_port()
    prov = provider_for(idp, port, lead, grant="client_credentials")
    prov["clientSecret"] = {"env": "PP_TEST_CLIENT_SECRET"}
    p = launch(start_proxy, idp, tmp_path, provider=prov, port=port)
    a = p.wait_state("logged_in", timeout=5)
    assert a["loggedIn"] is True and a["lastError"] is None, a
    c = idp.control
    assert c.token_results("client_credentials").get("ok", 0) >= 1
    log = c.token_call_log()
    assert log[0]["grant_type"] == "client_credentials" and log[0]["client_id"] == "confidential-client", log
    started = time.time()
    codes = []
    while time.time() - started < 4.5:
        r = p.call(f"/api/cc/{len(codes)}")
        codes.append(r.status)
        if r.status == 200:
            body = r.json()
            assert body["client_id"] == "confidential-client" and body["user"] is None, body
        time.sleep(0.05)
    n = c.token_calls("client_credentials")
    print(f"\nclient_credentials: {len(codes)} requests in 4.5 s, {n} token fetches (one at start, "
          f"then every {ttl - lead} s)")
    assert set(codes) == {200}, codes
    assert c.api_counters().get("unauthorized", 0) == 0
    assert 3 <= n <= 6, n
    assert c.token_calls("refresh_token") == 0 and c.token_calls("authorization_code") == 0
    assert c.max_concurrent("client_credentials") == 1
    toks = sorted((t for t in c.tokens() if t["grant_type"] == "client_credentials"), key=lambda t: t["seq"])
    for prev, nxt in zip(toks, toks[1:]):
        assert nxt["issued_at"] < prev["access_expires_at"], (prev, nxt)
    # no user login for this grant
    r = p.call("/_platform/login")
    assert r.status == 404 and r.json()["error"] == "login_unavailable", r
    assert p.call("/_platform/ready").status == 200
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- the wait gate


def test_gate_wait_holds_requests_until_a_login_releases_them(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    p = launch(start_proxy, idp, tmp_path, gate={"mode": "wait", "waitSeconds": 10})
    body = b'{"held": true, "pad": "' + b"x" * 5000 + b'"}'
    get = Background(p, "/api/held-get")
    post = Background(p, "/api/held-post", method="POST", body=body)
    time.sleep(1.0)
    assert not get.done and not post.done, (get.reply, post.reply)
    assert idp.control.api_counters().get("calls", 0) == 0, "held requests must not reach the upstream"
    # routes without credentials are not held
    r = p.call("/open/openid-configuration")
    assert r.status == 200 and r.elapsed < 1, r
    t = browser_login(p)
    assert t.callback_reply.status == 200, t.callback_reply
    logged_in = time.monotonic()
    g = get.join(5)
    q = post.join(5)
    assert g.status == 200 and g.json()["path"] == "/api/held-get", g
    assert q.status == 200, q
    assert q.json()["body_sha256"] == hashlib.sha256(body).hexdigest() and q.json()["body_bytes"] == len(body), q
    assert get.elapsed >= 1.0 and get.finished - logged_in < 2.0, (get.elapsed, get.finished - logged_in)
    assert_no_secrets_logged(idp, [p])


def test_gate_wait_times_out_with_401_awaiting_authorization(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    wait = 1.5
    p = launch(start_proxy, idp, tmp_path, gate={"mode": "wait", "waitSeconds": wait})
    held = Background(p, "/api/never")
    r = p.call("/mock/hello")
    assert r.status == 200 and r.elapsed < 1, r
    reply = held.join(wait + 5)
    assert reply.status == 401, reply
    body = reply.json()
    assert body["error"] == "awaiting_authorization" and body["login"] == "/_platform/login", body
    assert wait - 0.2 <= held.elapsed <= wait + 2.0, held.elapsed
    assert idp.control.api_counters().get("calls", 0) == 0
    assert p.auth()["state"] == "logged_out"
    assert_no_secrets_logged(idp, [p])
