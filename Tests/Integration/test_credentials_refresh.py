"""Credential lifecycle, refresh side (docs/login.md), against the
Authlib test IdP: proactive single-flight refresh with no request failing, refresh responses
without refresh_token / id_token, 50 concurrent upstream 401s healed by ONE refresh (with the
retry latency printed), a second 401 relayed, invalid_grant → awaiting_authorization with
the gate, and the IdP down (503, then offline) → login kept, 503 auth_server_unavailable,
recovery when it is back.

    cd Tests/Integration && python3 -m pytest -q -s test_credentials_refresh.py
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

from credentials_support import (  # noqa: F401  (fixtures)
    USER_SUBJECT,
    assert_no_secrets_logged,
    idp_factory,
    launch,
    login,
    percentiles,
    proxy_debug_logs,
    routes_for,
    stored_tokens,
    wait_until,
)


def refreshes(idp) -> int:
    return idp.control.token_calls("refresh_token")


def metric(p, name: str, route: str) -> int:
    text = p.call("/_platform/metrics").body.decode()
    m = re.search(rf'^{name}{{route="{route}"}} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def burst(p, n: int, path: str):
    """``n`` requests released at once by a barrier, each on its own connection."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def one(i):
        barrier.wait()
        try:
            out[i] = p.call(f"{path}{i}", timeout=30)
        except Exception as e:  # noqa: BLE001  (reported by the caller's assertion)
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def proxy_durations(p, prefix: str, n: int) -> dict:
    """p50/p99 of the proxy's own durationMs (request log lines) for paths under ``prefix``,
    in seconds: the latency without the Python client's thread scheduling."""
    def lines():
        found = [e["durationMs"] / 1000 for e in p.server.log_events("request")
                 if e.get("path", "").startswith(prefix)]
        return found if len(found) >= n else None
    return percentiles(wait_until(lines, timeout=5, what=f"{n} request log lines under {prefix}"))


def statuses(replies) -> dict:
    out = {}
    for r in replies:
        key = getattr(r, "status", type(r).__name__)
        out[key] = out.get(key, 0) + 1
    return out


def ms(d: dict) -> str:
    return f"p50 {d['p50'] * 1000:.1f} ms, p99 {d['p99'] * 1000:.1f} ms (min {d['min'] * 1000:.1f}, max {d['max'] * 1000:.1f})"


# --------------------------------------------------------------------------- proactive refresh


def test_proactive_refresh_keeps_every_request_succeeding(start_proxy, idp_factory, tmp_path):
    ttl, lead, duration = 3, 1, 8.0  # a lead of at most half the token's life: one refresh every 2 s
    idp = idp_factory(access_ttl=ttl)
    # retryOn401 off: a request sent with a dead token would show as a failure, not be healed
    p = launch(start_proxy, idp, tmp_path, refresh_before=lead, routes=routes_for(idp, retry=False))
    login(p)
    logged_in_at = time.time()
    results = []
    slow = []
    while time.time() - logged_in_at < duration:
        r = p.call(f"/api/loop/{len(results)}")
        results.append(r.status)
        if r.elapsed > 1.0:
            slow.append(r.elapsed)
        time.sleep(0.03)
    elapsed = time.time() - logged_in_at
    c = idp.control
    n = refreshes(idp)
    expected = elapsed / (ttl - lead)
    print(f"\nproactive refresh: {len(results)} requests over {elapsed:.1f} s, {n} refreshes at the IdP "
          f"(expected ≈ {expected:.1f}: one every {ttl - lead} s), statuses {statuses_of(results)}")
    assert results and all(s == 200 for s in results), statuses_of(results)
    assert c.api_counters().get("unauthorized", 0) == 0, c.api_counters()
    assert not slow, f"requests held more than 1 s: {slow}"
    assert abs(n - expected) <= 2, f"{n} refreshes in {elapsed:.1f} s, expected about {expected:.1f}"
    # Refreshing goes on (one every 2 s) while the IdP is asked: compare calls and results read
    # while none is in flight (both unchanged across a second read).
    for _ in range(50):
        before, calls = c.token_results("refresh_token"), refreshes(idp)
        if before == {"ok": calls} and (c.token_results("refresh_token"), refreshes(idp)) == (before, calls):
            break
        time.sleep(0.02)
    assert before == {"ok": calls}
    assert c.max_concurrent("refresh_token") == 1
    # proactive: each token was replaced before it expired
    toks = sorted((t for t in c.tokens() if t["grant_type"] in ("authorization_code", "refresh_token")),
                  key=lambda t: t["seq"])
    for prev, nxt in zip(toks, toks[1:]):
        assert nxt["issued_at"] < prev["access_expires_at"], (prev, nxt)
    # the newest tokens are the stored ones and the login is intact
    newest = toks[-1]
    stored_tokens(p, lambda s: s["access_token"] == newest["access_token"])
    a = p.auth()
    assert a["state"] in ("logged_in", "refreshing") and a["subject"] == USER_SUBJECT and a["lastError"] is None, a
    assert_no_secrets_logged(idp, [p])


def statuses_of(codes):
    out = {}
    for s in codes:
        out[s] = out.get(s, 0) + 1
    return out


def test_refresh_without_new_refresh_or_id_token_keeps_the_old_ones(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    before = stored_tokens(p)
    c = idp.control
    c.omit_refresh_token(1)
    c.omit_id_token(1)
    c.expire_all()
    assert p.call("/api/heal").status == 200
    assert refreshes(idp) == 1
    after = stored_tokens(p, lambda s: s["access_token"] != before["access_token"])
    assert after["refresh_token"] == before["refresh_token"], "refresh_token dropped after a response without one"
    assert after["id_token"] == before["id_token"], "id_token dropped after a response without one"
    assert p.auth()["subject"] == USER_SUBJECT
    # the kept refresh token still works for the next refresh (the IdP did not rotate it)
    c.expire_all()
    assert p.call("/api/heal-again").status == 200
    assert c.token_results("refresh_token") == {"ok": 2}
    latest = stored_tokens(p, lambda s: s["refresh_token"] != before["refresh_token"])
    assert latest["id_token"] != before["id_token"], "a new id_token replaces the old one"
    assert_no_secrets_logged(idp, [p])


def test_refreshed_tokens_that_cannot_be_saved_are_used_and_auth_says_a_restart_loses_them(
        start_proxy, idp_factory, tmp_path):
    """The IdP may have rotated the refresh token, so the new tokens are used from memory; was:
    nothing but a log line said they were not on disk."""
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    before = stored_tokens(p)
    assert p.auth()["lastError"] is None
    blocker = p.tokens_path.with_name(p.tokens_path.name + ".tmp")
    (blocker / "x").mkdir(parents=True)  # the store's temporary file cannot be made: the write fails
    idp.control.expire_all()
    assert p.call("/api/heal").status == 200
    assert refreshes(idp) == 1
    error = wait_until(lambda: p.auth()["lastError"], timeout=3, what="lastError after the failed write")
    assert "could not be saved" in error and "restart" in error, error
    assert p.auth()["loggedIn"] is True
    assert json.loads(p.tokens_path.read_text()) == before, "tokens.json changed though its write failed"

    (blocker / "x").rmdir()
    blocker.rmdir()
    idp.control.expire_all()
    assert p.call("/api/heal-again").status == 200
    stored_tokens(p, lambda s: s["access_token"] != before["access_token"])
    assert wait_until(lambda: p.auth()["lastError"] is None, timeout=3, what="lastError cleared by a good write")


# --------------------------------------------------------------------------- 401 refresh-and-retry


def test_50_concurrent_401s_cause_one_refresh_and_50_retries(start_proxy, idp_factory, tmp_path):
    n = 50
    token_delay = 0.5
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    burst(p, 10, "/api/warmup/")  # connections and threads warm on both sides

    # baseline: 50 concurrent requests, no 401
    c.reset()
    base = burst(p, n, "/api/base/")
    assert statuses(base) == {200: n}, statuses(base)
    base_lat = percentiles([r.elapsed for r in base])

    # every token dead at the IdP; the refresh answer is held back token_delay s so that all 50
    # requests have reached the upstream with the dead token before new tokens exist
    c.reset()
    c.delay(token=token_delay)
    c.expire_all()
    retry = burst(p, n, "/api/retry/")
    api = c.api_counters()
    retry_lat = percentiles([r.elapsed for r in retry if hasattr(r, "elapsed")])
    print(f"\n50 concurrent requests, every one answered 401 by the upstream first:"
          f"\n  refreshes at the IdP: {refreshes(idp)} (most in flight at once: {c.max_concurrent('refresh_token')})"
          f"\n  upstream calls {api.get('calls')}: {api.get('unauthorized')} × 401 then {api.get('ok')} × 200"
          f"\n  baseline burst (no 401):   {ms(base_lat)}"
          f"\n  401 burst (retried):       {ms(retry_lat)}  [token endpoint held {token_delay * 1000:.0f} ms]"
          f"\n  added by refresh+retry:    p50 {(retry_lat['p50'] - base_lat['p50']) * 1000:.1f} ms, "
          f"p99 {(retry_lat['p99'] - base_lat['p99']) * 1000:.1f} ms; "
          f"beyond the IdP's {token_delay * 1000:.0f} ms: p50 {(retry_lat['p50'] - base_lat['p50'] - token_delay) * 1000:.1f} ms, "
          f"p99 {(retry_lat['p99'] - base_lat['p99'] - token_delay) * 1000:.1f} ms")
    pb, pr = proxy_durations(p, "/api/base/", n), proxy_durations(p, "/api/retry/", n)
    print(f"  proxy-side durationMs:     baseline {ms(pb)}; 401 burst {ms(pr)}"
          f"\n                             added p50 {(pr['p50'] - pb['p50']) * 1000:.1f} ms, "
          f"p99 {(pr['p99'] - pb['p99']) * 1000:.1f} ms (of which {token_delay * 1000:.0f} ms is the held token endpoint)")
    assert statuses(retry) == {200: n}, statuses(retry)
    assert refreshes(idp) == 1, f"single-flight: {c.token_call_log()}"
    assert c.token_results("refresh_token") == {"ok": 1}
    assert api.get("unauthorized") == n, f"not every request met the dead token first: {api}"
    assert api.get("ok") == n, api
    assert metric(p, "platform_proxy_retries_after_401_total", "api") == n
    seqs = {r.json()["token_seq"] for r in retry}
    assert len(seqs) == 1, f"every retry carries the one refreshed token: {seqs}"

    # the same burst with nothing held back: what an app sees in practice (some requests may
    # already leave with the new token; still one refresh)
    c.reset()
    c.delay(token=0)
    c.expire_all()
    natural = burst(p, n, "/api/natural/")
    api = c.api_counters()
    nat_lat = percentiles([r.elapsed for r in natural if hasattr(r, "elapsed")])
    print(f"  unthrottled 401 burst:     {ms(nat_lat)}; {api.get('unauthorized')} of {n} met a 401, "
          f"{refreshes(idp)} refresh; added p50 {(nat_lat['p50'] - base_lat['p50']) * 1000:.1f} ms, "
          f"p99 {(nat_lat['p99'] - base_lat['p99']) * 1000:.1f} ms")
    pn = proxy_durations(p, "/api/natural/", n)
    print(f"  proxy-side durationMs:     unthrottled 401 burst {ms(pn)}; added p50 "
          f"{(pn['p50'] - pb['p50']) * 1000:.1f} ms, p99 {(pn['p99'] - pb['p99']) * 1000:.1f} ms")
    assert statuses(natural) == {200: n}, statuses(natural)
    assert refreshes(idp) == 1
    assert_no_secrets_logged(idp, [p])


def test_second_401_after_the_retry_is_relayed(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    routes = routes_for(idp) + [
        # the IdP's resource only takes access tokens: an id_token is refused every time
        {"name": "jwt", "path": "/jwt/", "upstream": idp.issuer + "/api/", "credential": "jwt",
         "retryOn401": True, "timeoutSeconds": 10},
        {"name": "noretry", "path": "/noretry/", "upstream": idp.issuer + "/api/",
         "credential": "access_token", "retryOn401": False, "timeoutSeconds": 10},
    ]
    p = launch(start_proxy, idp, tmp_path, routes=routes, refresh_before=30)
    login(p)
    c = idp.control
    c.reset()
    r = p.call("/jwt/twice", method="POST", body=b'{"k": "v"}', headers={"Content-Type": "application/json"})
    assert r.status == 401, r
    assert r.json().get("error") == "invalid_token", f"the upstream's own 401 is relayed: {r}"
    calls = c.api_call_log()
    assert [(x["method"], x["path"], x["status"]) for x in calls] == [("POST", "/api/twice", 401)] * 2, calls
    assert refreshes(idp) == 1
    # no retryOn401: the 401 is relayed at once, nothing refreshed
    c.reset()
    c.expire_all()
    r = p.call("/noretry/x")
    assert r.status == 401 and r.json().get("error") == "invalid_token", r
    assert refreshes(idp) == 0 and c.api_counters()["calls"] == 1
    assert p.auth()["state"] == "logged_in"
    assert_no_secrets_logged(idp, [p])


def test_echo_of_the_refreshed_token_is_masked_after_a_401_retry(start_proxy, idp_factory, tmp_path):
    """The retry after a 401 carries a new access token; a response echoing it is masked too."""
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, routes=routes_for(idp), refresh_before=30)
    login(p)
    first = p.call("/api/echo?echo=1")
    assert first.status == 200, first
    echoed = first.json()["authorization"]
    assert re.fullmatch(r"Bearer \*{8,}", echoed), f"the first token is masked: {echoed!r}"
    before = stored_tokens(p)["access_token"]
    assert echoed == "Bearer " + "*" * len(before)
    c = idp.control
    c.reset()
    c.expire_all()
    r = p.call("/api/echo?echo=1")
    assert r.status == 200, r
    assert refreshes(idp) == 1
    assert [x["status"] for x in c.api_call_log()] == [401, 200]
    new_token = stored_tokens(p, lambda s: s["access_token"] != before)["access_token"]
    echoed = r.json()["authorization"]
    assert echoed == "Bearer " + "*" * len(new_token), f"the refreshed token is masked, length kept: {echoed!r}"
    assert new_token.encode() not in r.body
    assert int(r.header("content-length")) == len(r.body)


def test_retry_replays_bodies_up_to_retryBodyBytes_and_relays_401_for_larger(start_proxy, idp_factory, tmp_path):
    limit = 1024
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30, extra={"limits": {"retryBodyBytes": limit}})
    login(p)
    c = idp.control
    c.reset()
    small = bytes(range(256)) * (limit // 256)  # exactly the limit
    c.expire_all()
    r = p.call("/api/small", method="PUT", body=small, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    assert r.json()["body_sha256"] == hashlib.sha256(small).hexdigest() and r.json()["body_bytes"] == len(small), r
    calls = [(x["path"], x["status"]) for x in c.api_call_log()]
    assert calls == [("/api/small", 401), ("/api/small", 200)], calls
    assert refreshes(idp) == 1
    # a body over the limit is streamed, not kept: its 401 comes back as the upstream sent it
    big = b"b" * (limit * 4)
    c.reset()
    c.expire_all()
    before = stored_tokens(p)["access_token"]
    r = p.call("/api/big", method="PUT", body=big, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 401 and r.json().get("error") == "invalid_token", r
    calls = [(x["path"], x["status"]) for x in c.api_call_log()]
    assert calls == [("/api/big", 401)], calls
    # Was: nothing was refreshed, so every later request met
    # the same refused token until a small one refreshed. The refresh is asked all the same.
    wait_until(lambda: refreshes(idp) == 1, 5, what="the refresh after the 401 of a body too large to keep")
    stored_tokens(p, lambda saved: saved["access_token"] != before)
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- refused refresh


def test_invalid_grant_awaits_authorization_and_gates_credentialed_routes_at_once(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.fail_refresh(1)  # 400 invalid_grant, and the refresh token is revoked
    c.expire_all()
    r = p.call("/api/refused")
    assert r.status == 401, r
    body = r.json()
    assert body["error"] == "awaiting_authorization" and body["login"] == "/_platform/login", body
    assert body.get("message") and body.get("requestID"), body
    assert c.token_results("refresh_token") == {"invalid_grant": 1}
    a = p.auth()
    assert a["state"] == "awaiting_authorization" and a["loggedIn"] is False, a
    assert a["lastError"] and "invalid_grant" in a["lastError"], a
    wait_until(lambda: not p.tokens_path.exists(), timeout=3, what="tokens.json removed")
    # credentialed routes: rejected at once, never sent upstream
    calls = c.api_counters()["calls"]
    for i in range(5):
        r = p.call(f"/api/after/{i}")
        assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
        assert r.elapsed < 0.5, r.elapsed
    assert c.api_counters()["calls"] == calls, "a gated request reached the upstream"
    assert refreshes(idp) == 1, "no refresh without a refresh token"
    # routes without credentials and mock routes are still served
    r = p.call("/open/openid-configuration")
    assert r.status == 200 and r.json()["issuer"] == idp.issuer, r
    r = p.call("/mock/hello")
    assert r.status == 200 and r.json() == {"mock": "hello"}, r
    assert p.call("/_platform/ready").status == 503
    # a new login heals everything
    login(p)
    assert p.call("/api/healed").status == 200
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- IdP down


def test_idp_answering_503_keeps_login_and_recovers(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    before = stored_tokens(p)
    c = idp.control
    c.down(status=503, endpoints=["token"])
    c.expire_all()
    r = p.call("/api/needs-refresh")
    assert r.status == 503, r
    assert r.json()["error"] == "auth_server_unavailable", r
    a = p.auth()
    assert a["state"] == "logged_in" and a["loggedIn"] is True and a["subject"] == USER_SUBJECT, a
    assert a["lastError"], a
    assert stored_tokens(p) == before, "the login is kept while the IdP is down"
    # while it stays down, requests keep getting 503 and the refresh is retried with backoff,
    # not once per request
    down_since = time.monotonic()
    answers = []
    while time.monotonic() - down_since < 3.0:
        answers.append(p.call("/api/during").status)
        time.sleep(0.05)
    attempts = c.counters()["down_rejections"].get("token", 0)
    print(f"\nIdP 503 for {time.monotonic() - down_since + 0.0:.1f} s: {len(answers)} requests "
          f"{statuses_of(answers)}, {attempts} refresh attempts (backoff 1, 2, 4 … s, jittered)")
    assert set(answers) == {503}, statuses_of(answers)
    assert 2 <= attempts <= 5, f"{attempts} refresh attempts in ~3 s (backoff expected)"
    assert p.auth()["state"] in ("logged_in", "refreshing")
    # back up: the login recovers without the user
    c.up()
    up_at = time.monotonic()
    wait_until(lambda: p.call("/api/recovered").status == 200, timeout=15, interval=0.2,
               what="a request succeeding after the IdP came back")
    recovery = time.monotonic() - up_at
    print(f"recovered {recovery:.1f} s after the IdP came back")
    a = p.wait_state("logged_in", timeout=3)
    assert a["lastError"] is None, a
    assert c.token_results("refresh_token").get("ok") == 1
    assert_no_secrets_logged(idp, [p])


def test_idp_offline_keeps_login_and_recovers_when_back(start_proxy, idp_factory, tmp_path):
    ttl, lead = 3, 2
    idp = idp_factory(access_ttl=ttl)
    p = launch(start_proxy, idp, tmp_path, refresh_before=lead)
    a = login(p)
    expires_at = a["expiresAt"]
    c = idp.control
    c.offline()  # connection refused on the main port (discovery, token, /api/ alike)
    # the proactive refresh fails: login kept, lastError set
    a = wait_until(lambda: (lambda x: x if x["lastError"] else None)(p.auth()), timeout=ttl + 2,
                   what="lastError after the failed proactive refresh")
    assert a["state"] == "logged_in" and a["loggedIn"] is True, a
    assert p.tokens_path.exists()
    # once the token has expired, requests that need it get 503 (no upstream attempt with a dead token)
    # (expiresAt is reported rounded to the second: wait a whole second past it)
    time.sleep(max(0.0, expires_at - time.time()) + 1.0)
    r = p.call("/api/after-expiry")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    assert p.auth()["state"] in ("logged_in", "refreshing")
    c.online()
    up_at = time.monotonic()
    wait_until(lambda: p.call("/api/back").status == 200, timeout=15, interval=0.2,
               what="a request succeeding after the IdP came back online")
    print(f"\nIdP offline: recovered {time.monotonic() - up_at:.1f} s after it came back")
    a = p.wait_state("logged_in", timeout=3)
    assert a["lastError"] is None and a["subject"] == USER_SUBJECT, a
    assert c.token_results("refresh_token").get("ok", 0) >= 1
    assert_no_secrets_logged(idp, [p])


def test_analytics_401_asks_for_one_refresh_and_resends_the_batch_with_the_new_token(start_proxy, idp_factory,
                                                                                      tmp_path):
    from analytics_sink import AnalyticsSink

    idp = idp_factory(access_ttl=300)
    sink = AnalyticsSink().start()
    try:
        p = launch(start_proxy, idp, tmp_path, refresh_before=30, extra={"analytics": {
            "root": "pennmobile", "endpoint": sink.url, "credential": "access_token", "product": 1,
            "pushIntervalSeconds": 3600, "bufferIntervalSeconds": 0}})
        login(p)
        first = stored_tokens(p)["access_token"]
        # The analytics endpoint no longer accepts the token the proxy holds (revoked there).
        sink.respond = lambda upload: 401 if upload.header("authorization") == f"Bearer {first}" else 200

        def post(value: str):
            body = json.dumps({"events": [{"key": "pennmobile.refresh.test", "value": value}]}).encode()
            assert p.call("/_platform/analytics/events", method="POST", body=body).status == 202
            assert p.call("/_platform/analytics/flush", method="POST", body=b"{}").status == 200

        post("1")
        uploads = sink.snapshot()
        assert [u.status for u in uploads] == [401, 200], [(u.status, u.header("authorization")) for u in uploads]
        assert uploads[1].header("authorization") != f"Bearer {first}"
        assert uploads[1].pairs() == [("pennmobile.refresh.test", "1")]
        assert refreshes(idp) == 1

        # An endpoint that refuses every token: one refresh and one resend per cycle, then the
        # batch stays stored for the next cycle (nothing dropped, no refresh loop).
        sink.respond = lambda upload: 401
        post("2")
        assert [u.status for u in sink.snapshot()][2:] == [401, 401]
        assert refreshes(idp) == 2
        sink.respond = lambda upload: 200
        assert p.call("/_platform/analytics/flush", method="POST", body=b"{}").status == 200
        assert sink.accepted()[-1].pairs() == [("pennmobile.refresh.test", "2")]
    finally:
        sink.stop()
