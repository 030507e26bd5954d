"""An IdP that misbehaves must not log the user out or flood itself (docs/login.md,
refresh failures): ``expires_in: 0`` refreshes at most once a second; an unusable
answer that rotated the refresh token keeps the rotated one; a refresh whose answer was lost
(timeout) is no logout; only an OAuth ``invalid_grant`` ends a login, not an HTML 404 nor
``invalid_client``; a moved token endpoint is found by reading discovery again (after repeated
failures, and on SIGHUP); a token that cannot go in a header is refused with a reason.

    cd Tests/Integration && python3 -m pytest -q test_idp_faults.py
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

from credentials_support import (  # noqa: F401  (fixtures)
    assert_no_secrets_logged,
    browser_login,
    idp_factory,
    launch,
    login,
    proxy_debug_logs,
    stored_tokens,
    wait_until,
)
from proxy import binary_path


def refreshes(idp) -> int:
    return idp.control.token_calls("refresh_token")


def latest_refresh_token(idp) -> str:
    return idp.control.issued("refresh_token")[-1]["value"]


# --------------------------------------------------------------------------- expires_in 0


def test_expires_in_zero_refreshes_at_most_once_a_second_under_steady_traffic(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.token_answer("refresh_token", count=-1, set={"expires_in": 0})
    c.expire_all()
    # The 401 refreshes; the new token says it expires at once (the IdP still accepts it).
    assert p.call("/api/first").status == 200
    before = refreshes(idp)
    stop = time.monotonic() + 3
    replies = []

    def traffic():
        while time.monotonic() < stop:
            replies.append(p.call("/api/steady", timeout=10).status)

    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    made = refreshes(idp) - before
    print(f"\nexpires_in 0: {made} refreshes in 3 s under {len(replies)} requests")
    assert len(replies) > 20, len(replies)
    assert set(replies) == {200}, {s: replies.count(s) for s in set(replies)}
    # At most one a second (plus the edges of the window), however many requests came.
    assert 1 <= made <= 5, made


@pytest.mark.parametrize("expires_in", [1e19, "1e300"], ids=["beyond_int64", "string_1e300"])
def test_a_huge_expires_in_is_no_crash_of_metrics_or_the_status_command(start_proxy, idp_factory, tmp_path, expires_in):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    idp.control.token_answer("refresh_token", count=-1, set={"expires_in": expires_in})
    idp.control.expire_all()
    assert p.call("/api/huge").status == 200
    assert p.auth()["expiresAt"] > 9.3e18
    # On a build without the fix the scrape traps the process (Int of the expiry): no answer, exit by SIGILL.
    metrics = p.server.get("/_platform/metrics")
    assert metrics.status == 200, metrics
    series = [line for line in metrics.body.decode().splitlines()
              if line.startswith("platform_proxy_provider_token_expiry_timestamp_seconds{")]
    assert len(series) == 1 and float(series[0].split()[-1]) > 9.3e18, series
    config = tmp_path / "cli-config.json"
    config.write_text(json.dumps(p.config))
    status = subprocess.run([binary_path(), "status", "--config", str(config)], capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    assert status.returncode == 0 and "after the year 9999" in status.stdout, status
    assert p.server.running


# --------------------------------------------------------------------------- rotated, then refused


@pytest.mark.parametrize("answer", [
    {"drop": ["access_token"]},
    {"set": {"access_token": ""}},
    {"set": {"expires_in": -30}},
], ids=["missing_access_token", "empty_access_token", "negative_expires_in"])
def test_unusable_answer_after_a_rotation_keeps_the_rotated_refresh_token(start_proxy, idp_factory, tmp_path, answer):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.token_answer("refresh_token", count=1, **answer)
    c.expire_all()
    r = p.call("/api/unusable")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    rotated = latest_refresh_token(idp)
    # The retry uses the rotated refresh token: the IdP answers, the login heals.
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 2, timeout=10, what="the retry")
    assert "invalid_grant" not in c.token_results("refresh_token"), c.token_results("refresh_token")
    a = p.wait_state("logged_in", timeout=5, lastError=None)
    assert a["loggedIn"] is True, a
    assert p.call("/api/after").status == 200
    assert latest_refresh_token(idp) != rotated
    stored_tokens(p, lambda d: d.get("refresh_token") == latest_refresh_token(idp))
    assert_no_secrets_logged(idp, [p])


def test_refresh_whose_answer_timed_out_survives_one_invalid_grant_not_two(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.delay(token=11)  # longer than the proxy's 10 s: the IdP rotates after the proxy gave up
    c.expire_all()
    reply = []
    t = threading.Thread(target=lambda: reply.append(p.call("/api/slow", timeout=30)))
    t.start()
    wait_until(lambda: refreshes(idp) >= 1, timeout=5, what="the slow refresh")
    # The proxy's retries meet a 503 until the slow call has rotated the refresh token.
    c.down(503, endpoints=["token"])
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 1, timeout=20, what="the late rotation")
    t.join(30)
    assert reply and reply[0].status in (503, 504), reply
    c.delay(token=0)
    c.up()
    # The next retry presents the refresh token the lost answer replaced: invalid_grant.
    wait_until(lambda: c.token_results("refresh_token").get("invalid_grant", 0) >= 1, timeout=15,
               what="the retry with the old refresh token")
    time.sleep(0.3)
    a = p.auth()
    assert a["state"] != "awaiting_authorization" and a["loggedIn"] is True, a
    assert a["lastError"] and "invalid_grant" in a["lastError"], a
    assert p.tokens_path.exists(), "tokens.json was deleted"
    r = p.call("/api/after-timeout")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    # The retry after that refusal is the last: the rotated token cannot come back, so a second
    # invalid_grant ends the login. On a build without the fix it stays "logged_in" with 503s and
    # refreshes with the spent token every minute, forever.
    wait_until(lambda: c.token_results("refresh_token").get("invalid_grant", 0) >= 2, timeout=70,
               what="the second retry with the old refresh token")
    a = p.wait_state("awaiting_authorization", timeout=5)
    assert a["loggedIn"] is False, a
    assert c.token_results("refresh_token").get("invalid_grant", 0) == 2


# --------------------------------------------------------------------------- only invalid_grant is a refusal


def test_html_404_from_the_token_endpoint_keeps_the_login(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.down(404, endpoints=["token"], html=True)
    c.expire_all()
    r = p.call("/api/html404")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    a = p.auth()
    assert a["state"] != "awaiting_authorization" and a["loggedIn"] is True, a
    assert a["lastError"] and "HTTP 404" in a["lastError"], a
    assert p.tokens_path.exists(), "tokens.json was deleted"
    c.up()
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 1, timeout=10, what="the retry")
    p.wait_state("logged_in", timeout=5, lastError=None)
    assert p.call("/api/healed").status == 200


def test_invalid_client_is_a_configuration_problem_not_a_logout(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.fail_refresh(1, error="invalid_client", status=401, revoke=False)
    c.expire_all()
    r = p.call("/api/invalid-client")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    a = p.auth()
    assert a["loggedIn"] is True and a["lastError"] and "invalid_client" in a["lastError"], a
    assert p.tokens_path.exists(), "tokens.json was deleted"
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 1, timeout=10, what="the retry")
    p.wait_state("logged_in", timeout=5, lastError=None)


def test_moved_token_endpoint_is_found_by_reading_discovery_again_after_repeated_failures(
        start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    discoveries = c.endpoint_calls("discovery")
    c.move_token()
    c.expire_all()
    r = p.call("/api/moved")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    # Three failures without an OAuth answer: discovery is read again, and the refresh retried there.
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 1, timeout=15, what="a refresh at /v2/token")
    assert c.endpoint_calls("discovery") > discoveries
    a = p.wait_state("logged_in", timeout=5, lastError=None)
    assert a["loggedIn"] is True, a
    assert p.call("/api/after-move").status == 200
    assert p.server.log_events("provider_endpoints_changed"), "no provider_endpoints_changed log line"


def test_sighup_reads_discovery_again(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    discoveries = c.endpoint_calls("discovery")
    c.move_token()
    p.server.signal(signal.SIGHUP)
    wait_until(lambda: p.server.log_events("provider_endpoints_changed"), timeout=5,
               what="provider_endpoints_changed after SIGHUP")
    assert c.endpoint_calls("discovery") == discoveries + 1
    c.expire_all()
    # The 401 refreshes at the new endpoint at once: nothing failed, nothing was logged out.
    assert p.call("/api/after-sighup").status == 200
    assert [e["status"] for e in c.token_call_log() if e["grant_type"] == "refresh_token"] == [200]


def test_a_discovery_re_read_without_a_token_endpoint_keeps_the_endpoints_in_use(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    # A discovery that answers 200 with an error object (a maintenance page's JSON) names no endpoint.
    c.discovery_answer({"error": "temporarily_unavailable"})
    p.server.signal(signal.SIGHUP)
    wait_until(lambda: p.server.log_events("provider_rediscovery_failed"), timeout=5,
               what="provider_rediscovery_failed after SIGHUP")
    assert "token_endpoint" in p.server.log_events("provider_rediscovery_failed")[0]["reason"]
    c.expire_all()
    # On a build without the fix: the token endpoint is forgotten, so the refresh fails
    # ("the token endpoint is not known yet") and the call is a 503.
    r = p.call("/api/after-bad-discovery")
    assert r.status == 200, r
    assert [e["status"] for e in c.token_call_log() if e["grant_type"] == "refresh_token"] == [200]


# --------------------------------------------------------------------------- tokens that cannot go in a header


@pytest.mark.parametrize("value", ["{} x", "{}\u00e9"], ids=["space", "non_ascii"])
def test_login_with_a_token_that_cannot_go_in_a_header_is_refused_with_a_reason(
        start_proxy, idp_factory, tmp_path, value):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    c = idp.control
    c.token_answer("authorization_code", count=1, set={"access_token": value})
    t = browser_login(p)
    assert t.callback_reply.status >= 400, t.callback_reply
    a = p.auth()
    assert a["loggedIn"] is False and a["state"] != "logged_in", a
    assert a["lastError"] and "cannot be sent in a header" in a["lastError"], a
    ready = p.call("/_platform/ready")
    assert ready.status == 503, ready
    assert p.server.log_events("login_failed"), "nothing logged"
    assert not p.tokens_path.exists()
    assert_no_secrets_logged(idp, [p])


def test_refreshed_token_that_cannot_go_in_a_header_is_refused_and_the_next_one_used(
        start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    c = idp.control
    c.token_answer("refresh_token", count=1, set={"access_token": "{} x"})
    c.expire_all()
    r = p.call("/api/space")
    assert r.status == 503 and r.json()["error"] == "auth_server_unavailable", r
    assert "header" in r.json().get("message", "") or "header" in (p.auth()["lastError"] or ""), r
    wait_until(lambda: c.token_results("refresh_token").get("ok", 0) >= 2, timeout=10, what="the retry")
    p.wait_state("logged_in", timeout=5, lastError=None)
    assert p.call("/api/after-space").status == 200
    assert_no_secrets_logged(idp, [p])
