"""Self-tests of the test IdP (idp/server.py, Authlib on Flask): every flow driven directly
with http.client, no proxy involved.

    cd Tests/Integration && python3 -m pytest -q test_idp_server.py
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from idp.control import DEVICE_CODE_GRANT_TYPE, ControlError, IdPProcess, pkce_pair

REDIRECT_URI = "http://127.0.0.1:54321/_platform/callback"
SCOPE = "openid read introspection"


# --------------------------------------------------------------------------- plumbing


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return self.headers.get(name.lower())


def call(url, method="GET", form=None, headers=None, basic=None, bearer=None, body=None, timeout=10):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    hdrs = {"Connection": "close", **(headers or {})}
    if form is not None:
        body = urlencode(form).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    if basic is not None:
        hdrs["Authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
    if bearer is not None:
        hdrs["Authorization"] = "Bearer " + bearer
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    log = tmp_path_factory.mktemp("idp") / "idp.log"
    started = time.monotonic()
    server = IdPProcess(log_path=log, access_ttl=300, refresh_ttl=3600, device_interval=1)
    server.start()
    server.startup_seconds = time.monotonic() - started
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture
def ctl(idp):
    control = idp.control
    control.reset(tokens=True)
    yield control
    control.reset()


@pytest.fixture
def disco(idp):
    return call(idp.discovery_url).json()


def authorize(idp, challenge, state="st-1", nonce="n-1", client_id=None, redirect_uri=REDIRECT_URI,
              scope=SCOPE, method="S256"):
    params = {"response_type": "code", "client_id": client_id or idp.public_client_id,
              "redirect_uri": redirect_uri, "scope": scope, "state": state}
    if nonce:
        params["nonce"] = nonce
    if challenge:
        params["code_challenge"] = challenge
        params["code_challenge_method"] = method
    return call(idp.endpoint("/authorize?" + urlencode(params)))


def redirect_params(reply) -> dict:
    assert reply.status == 302, (reply.status, reply.body)
    loc = urlsplit(reply.header("Location"))
    return {k: v[0] for k, v in parse_qs(loc.query).items()}


def token(idp, form, basic=None):
    return call(idp.endpoint("/token"), "POST", form=form, basic=basic)


def login(idp) -> dict:
    """The whole PKCE login; returns the token response."""
    verifier, challenge = pkce_pair()
    code = redirect_params(authorize(idp, challenge))["code"]
    r = token(idp, {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
                    "client_id": idp.public_client_id, "code_verifier": verifier})
    assert r.status == 200, r.body
    return r.json()


def refresh(idp, refresh_token, client_id=None):
    return token(idp, {"grant_type": "refresh_token", "refresh_token": refresh_token,
                       "client_id": client_id or idp.public_client_id})


def decode_id_token(idp, id_token):
    from joserfc import jwt
    from joserfc.jwk import KeySet

    keys = KeySet.import_key_set(call(idp.endpoint("/jwks")).json())
    return jwt.decode(id_token, keys, algorithms=["RS256"]).claims


# --------------------------------------------------------------------------- tests


def test_starts_fast_and_reports_its_ports(idp):
    assert idp.startup_seconds < 2.0, idp.startup_seconds
    assert idp.issuer == f"http://127.0.0.1:{idp.port}"
    assert idp.control_port and idp.control_port != idp.port
    assert idp.control.health()["status"] == "ok"
    # the control port serves /_test/ only
    assert call(f"http://127.0.0.1:{idp.control_port}/.well-known/openid-configuration").status == 404


def test_discovery(idp, ctl, disco):
    iss = idp.issuer
    assert disco["issuer"] == iss
    for key, path in [("authorization_endpoint", "/authorize"), ("token_endpoint", "/token"),
                      ("revocation_endpoint", "/revoke"), ("userinfo_endpoint", "/userinfo"),
                      ("device_authorization_endpoint", "/device_authorization"), ("jwks_uri", "/jwks")]:
        assert disco[key] == iss + path
    assert disco["code_challenge_methods_supported"] == ["S256"]
    assert set(disco["grant_types_supported"]) >= {"authorization_code", "refresh_token", "client_credentials",
                                                   DEVICE_CODE_GRANT_TYPE}
    jwks = call(disco["jwks_uri"]).json()
    assert jwks["keys"][0]["kty"] == "RSA" and "d" not in jwks["keys"][0]
    assert ctl.endpoint_calls("discovery") == 1 and ctl.endpoint_calls("jwks") == 1


def test_pkce_login_wrong_verifier_rejected_then_right_one_works(idp, ctl):
    verifier, challenge = pkce_pair()
    params = redirect_params(authorize(idp, challenge, state="xyz", nonce="nonce-42"))
    assert params["state"] == "xyz" and params["code"]
    base = {"grant_type": "authorization_code", "code": params["code"], "redirect_uri": REDIRECT_URI,
            "client_id": idp.public_client_id}

    wrong, _ = pkce_pair()
    r = token(idp, {**base, "code_verifier": wrong})
    assert r.status == 400 and r.json()["error"] == "invalid_grant", r.body
    r = token(idp, base)  # no verifier at all
    assert r.status == 400 and r.json()["error"] == "invalid_request", r.body

    r = token(idp, {**base, "code_verifier": verifier})
    assert r.status == 200, r.body
    tok = r.json()
    assert tok["token_type"] == "Bearer" and tok["expires_in"] == 300
    assert tok["access_token"] and tok["refresh_token"] and tok["id_token"]
    assert "no-store" in r.header("Cache-Control")

    claims = decode_id_token(idp, tok["id_token"])
    assert claims["iss"] == idp.issuer
    assert claims["aud"] == idp.public_client_id
    assert claims["sub"] == "user-1" and claims["pennkey"] == "testuser"
    assert claims["nonce"] == "nonce-42"
    assert claims["exp"] > claims["iat"] >= int(time.time()) - 5

    # a code is good once
    r = token(idp, {**base, "code_verifier": verifier})
    assert r.status == 400 and r.json()["error"] == "invalid_grant"
    assert ctl.token_results("authorization_code") == {"invalid_grant": 2, "invalid_request": 1, "ok": 1}


def test_authorize_requires_s256_and_a_registered_redirect(idp, ctl):
    # a public client without code_challenge: error redirected to the client
    p = redirect_params(authorize(idp, None, state="s1"))
    assert p["error"] == "invalid_request" and p["state"] == "s1"
    _, challenge = pkce_pair()
    p = redirect_params(authorize(idp, challenge, method="plain"))
    assert p["error"] == "invalid_request"
    # an unregistered redirect URI is never redirected to
    r = authorize(idp, challenge, redirect_uri="http://evil.example/_platform/callback")
    assert r.status == 400 and "location" not in r.headers
    # any loopback port is accepted; other ones can be registered at run time
    other = "http://127.0.0.1:9/elsewhere"
    assert authorize(idp, challenge, redirect_uri=other).status == 400
    ctl.set_redirect_uris(idp.public_client_id, [other])
    assert "code" in redirect_params(authorize(idp, challenge, redirect_uri=other))


def test_deny_switch(idp, ctl):
    ctl.deny_next()
    _, challenge = pkce_pair()
    p = redirect_params(authorize(idp, challenge, state="s2"))
    assert p["error"] == "access_denied" and p["state"] == "s2" and "code" not in p
    assert "code" in redirect_params(authorize(idp, challenge))  # only the next one


def test_login_form_switch_counts_forms_and_answers_prompt_none_from_the_session(idp, ctl):
    ctl.require_login_form()
    _, challenge = pkce_pair()
    # No session: prompt=none comes back with login_required, and no form is counted.
    params = {"response_type": "code", "client_id": idp.public_client_id, "redirect_uri": REDIRECT_URI,
              "scope": SCOPE, "state": "s3", "code_challenge": challenge, "code_challenge_method": "S256"}
    p = redirect_params(call(idp.endpoint("/authorize?" + urlencode({**params, "prompt": "none"}))))
    assert p["error"] == "login_required" and p["state"] == "s3" and "code" not in p
    assert ctl.login_forms() == 0
    # Interactively: the form, counted; submitting it starts a session and goes back to /authorize.
    form = authorize(idp, challenge, state="s4")
    assert form.status == 200 and b"<form method=post action=/login>" in form.body
    assert ctl.login_forms() == 1
    submit = call(idp.endpoint("/login"), "POST", form={"next": urlencode(params), "username": "u"})
    assert submit.status == 302 and submit.header("Location").startswith("/authorize?"), submit.status
    cookie = submit.header("Set-Cookie").split(";", 1)[0]
    # With the session cookie, prompt=none signs in silently and no second form is shown.
    again = call(idp.endpoint("/authorize?" + urlencode({**params, "prompt": "none"})), headers={"Cookie": cookie})
    assert "code" in redirect_params(again)
    assert ctl.login_forms() == 1
    # deny_clients refuses one client always.
    ctl.require_login_form(False)
    ctl.deny_clients(idp.public_client_id)
    assert redirect_params(authorize(idp, challenge))["error"] == "access_denied"
    assert redirect_params(authorize(idp, challenge))["error"] == "access_denied"


def test_refresh_rotates_and_old_refresh_token_is_rejected(idp, ctl):
    first = login(idp)
    r = refresh(idp, first["refresh_token"])
    assert r.status == 200, r.body
    second = r.json()
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    assert decode_id_token(idp, second["id_token"])["sub"] == "user-1"

    r = refresh(idp, first["refresh_token"])
    assert r.status == 400 and r.json()["error"] == "invalid_grant"
    assert refresh(idp, second["refresh_token"]).status == 200
    assert [x["token"] for x in ctl.revoked("rotation")] == [first["refresh_token"], second["refresh_token"]]
    # the old access token lives on until it expires
    assert call(idp.endpoint("/api/me"), bearer=first["access_token"]).status == 200
    assert ctl.token_calls("refresh_token") == 3


def test_refresh_switches_omit_refresh_token_and_id_token(idp, ctl):
    first = login(idp)
    ctl.omit_refresh_token(1)
    r = refresh(idp, first["refresh_token"]).json()
    assert "refresh_token" not in r and "id_token" in r
    # no new one issued, so the old one stays valid
    ctl.omit_id_token(1)
    r = refresh(idp, first["refresh_token"]).json()
    assert "refresh_token" in r and "id_token" not in r
    r = refresh(idp, r["refresh_token"]).json()
    assert "refresh_token" in r and "id_token" in r


def test_fail_refresh_switch(idp, ctl):
    tok = login(idp)
    ctl.fail_refresh(1)
    r = refresh(idp, tok["refresh_token"])
    assert r.status == 400 and r.json()["error"] == "invalid_grant"
    # invalid_grant revokes the presented refresh token, like a real IdP that forgot the grant
    r = refresh(idp, tok["refresh_token"])
    assert r.status == 400 and r.json()["error"] == "invalid_grant"
    assert ctl.token_results("refresh_token") == {"invalid_grant": 2}

    tok = login(idp)
    ctl.fail_refresh(2, error="temporarily_unavailable", status=503)
    for _ in range(2):
        r = refresh(idp, tok["refresh_token"])
        assert r.status == 503 and r.json()["error"] == "temporarily_unavailable"
    assert refresh(idp, tok["refresh_token"]).status == 200


def test_token_answer_switch_rewrites_the_answer_after_the_grant_rotated(idp, ctl):
    tok = login(idp)
    ctl.token_answer("refresh_token", count=1, set={"access_token": "{} x", "expires_in": 0}, drop=["id_token"])
    r = refresh(idp, tok["refresh_token"])
    assert r.status == 200, r.body
    bad = r.json()
    assert bad["access_token"].endswith(" x") and bad["expires_in"] == 0 and "id_token" not in bad
    # the rotation happened: the old refresh token is spent, the one in the answer works
    assert refresh(idp, tok["refresh_token"]).json()["error"] == "invalid_grant"
    good = refresh(idp, bad["refresh_token"]).json()
    assert " " not in good["access_token"] and good["expires_in"] == 300


def test_move_token_switch_and_html_down(idp, ctl, disco):
    tok = login(idp)
    ctl.move_token()
    moved = call(idp.discovery_url).json()
    assert moved["token_endpoint"] == idp.endpoint("/v2/token") != disco["token_endpoint"]
    r = refresh(idp, tok["refresh_token"])
    assert r.status == 404 and r.header("content-type").startswith("text/html"), r.body
    r = call(idp.endpoint("/v2/token"), "POST", form={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"],
                                                      "client_id": idp.public_client_id})
    assert r.status == 200, r.body
    ctl.move_token(False)
    ctl.down(404, endpoints=["token"], html=True)
    r = refresh(idp, r.json()["refresh_token"])
    assert r.status == 404 and r.body.startswith(b"<!doctype html>"), r.body


def test_client_credentials_basic_and_post(idp, ctl):
    cid, secret = idp.confidential_client_id, idp.confidential_client_secret
    r = token(idp, {"grant_type": "client_credentials", "scope": "read"}, basic=(cid, secret))
    assert r.status == 200, r.body
    basic = r.json()
    assert basic["scope"] == "read" and "refresh_token" not in basic and "id_token" not in basic
    r = token(idp, {"grant_type": "client_credentials", "scope": "read", "client_id": cid, "client_secret": secret})
    assert r.status == 200, r.body
    assert r.json()["access_token"] != basic["access_token"]

    r = token(idp, {"grant_type": "client_credentials"}, basic=(cid, "wrong"))
    assert r.status == 401 and r.json()["error"] == "invalid_client"
    # a public client may not use it
    r = token(idp, {"grant_type": "client_credentials", "client_id": idp.public_client_id})
    assert r.status in (400, 401) and r.json()["error"] in ("invalid_client", "unauthorized_client")

    api = call(idp.endpoint("/api/service"), bearer=basic["access_token"])
    assert api.status == 200 and api.json()["user"] is None and api.json()["client_id"] == cid
    assert ctl.token_results("client_credentials") == {"ok": 2, "invalid_client": 2}


def test_device_flow_pending_slow_down_approved(idp, ctl):
    r = call(idp.endpoint("/device_authorization"), "POST", form={"client_id": idp.public_client_id, "scope": SCOPE})
    assert r.status == 200, r.body
    dev = r.json()
    assert dev["interval"] == 1 and dev["verification_uri"] == idp.issuer + "/device"
    assert dev["user_code"] and dev["device_code"] and dev["expires_in"] > 0
    poll = {"grant_type": DEVICE_CODE_GRANT_TYPE, "device_code": dev["device_code"],
            "client_id": idp.public_client_id}

    r = token(idp, poll)
    assert r.status == 400 and r.json()["error"] == "authorization_pending"
    ctl.slow_down_next(1)
    r = token(idp, poll)
    assert r.status == 400 and r.json()["error"] == "slow_down"
    r = token(idp, poll)
    assert r.json()["error"] == "authorization_pending"

    assert ctl.devices()[0]["status"] == "pending"
    assert ctl.approve_device()["user_code"] == dev["user_code"]
    r = token(idp, poll)
    assert r.status == 200, r.body
    tok = r.json()
    assert tok["refresh_token"] and decode_id_token(idp, tok["id_token"])["pennkey"] == "testuser"
    assert token(idp, poll).status == 400  # a device code is good once
    polls = ctl.device_polls()
    assert [p["result"] for p in polls] == ["authorization_pending", "slow_down", "authorization_pending",
                                            "approved", "invalid_request"]
    assert polls[1]["interval"] == 1 + 5  # slow_down adds 5 s to the interval (RFC 8628 3.5)
    assert call(idp.endpoint("/api/me"), bearer=tok["access_token"]).status == 200


def test_device_flow_denied_and_verification_uri(idp, ctl):
    dev = call(idp.endpoint("/device_authorization"), "POST",
               form={"client_id": idp.public_client_id, "scope": SCOPE}).json()
    poll = {"grant_type": DEVICE_CODE_GRANT_TYPE, "device_code": dev["device_code"],
            "client_id": idp.public_client_id}
    ctl.approve_device(dev["user_code"], approve=False)
    r = token(idp, poll)
    assert r.status == 400 and r.json()["error"] == "access_denied"
    # the verification URI approves like /authorize does
    dev = call(idp.endpoint("/device_authorization"), "POST",
               form={"client_id": idp.public_client_id, "scope": SCOPE}).json()
    assert call(dev["verification_uri_complete"]).status == 200
    r = token(idp, {**poll, "device_code": dev["device_code"]})
    assert r.status == 200, r.body


def test_revocation_is_recorded(idp, ctl):
    tok = login(idp)
    r = call(idp.endpoint("/revoke"), "POST", form={"token": tok["refresh_token"], "token_type_hint": "refresh_token",
                                                    "client_id": idp.public_client_id})
    assert r.status == 200, r.body
    rec = ctl.revocations()
    assert len(rec) == 1 and rec[0]["token"] == tok["refresh_token"] and rec[0]["revoked"] == "refresh_token"
    assert rec[0]["token_type_hint"] == "refresh_token" and rec[0]["client_id"] == idp.public_client_id
    # RFC 7009: the refresh token and the access token of the grant are gone
    assert refresh(idp, tok["refresh_token"]).json()["error"] == "invalid_grant"
    assert call(idp.endpoint("/api/me"), bearer=tok["access_token"]).status == 401
    # unknown tokens are answered 200 too, and recorded
    r = call(idp.endpoint("/revoke"), "POST", form={"token": "nope", "client_id": idp.public_client_id})
    assert r.status == 200 and ctl.revocations()[-1]["revoked"] is None
    # a confidential client revokes with its credentials
    cc = token(idp, {"grant_type": "client_credentials"},
               basic=(idp.confidential_client_id, idp.confidential_client_secret)).json()
    r = call(idp.endpoint("/revoke"), "POST", form={"token": cc["access_token"]},
             basic=(idp.confidential_client_id, idp.confidential_client_secret))
    assert r.status == 200 and ctl.revocations()[-1]["revoked"] == "access_token"
    assert ctl.endpoint_calls("revocation") == 3


def test_userinfo(idp, ctl):
    tok = login(idp)
    r = call(idp.endpoint("/userinfo"), bearer=tok["access_token"])
    assert r.status == 200, r.body
    info = r.json()
    assert info["sub"] == "user-1" and info["pennkey"] == "testuser"
    assert info["name"] == "Test User" and info["email"] == "testuser@example.test"
    assert call(idp.endpoint("/userinfo"), "POST", bearer=tok["access_token"]).status == 200
    r = call(idp.endpoint("/userinfo"), bearer="not-a-token")
    assert r.status == 401 and "invalid_token" in r.header("WWW-Authenticate")
    assert call(idp.endpoint("/userinfo")).status == 401
    ctl.expire(tok["access_token"])
    assert call(idp.endpoint("/userinfo"), bearer=tok["access_token"]).status == 401


def test_api_resource_200_then_401_after_expiry(idp, ctl):
    ctl.set_ttl(access=1)
    tok = login(idp)
    assert tok["expires_in"] == 1
    r = call(idp.endpoint("/api/me?x=1"), "POST", bearer=tok["access_token"], body=b"hello")
    assert r.status == 200, r.body
    j = r.json()
    assert j["path"] == "/api/me" and j["query"] == "x=1" and j["user"]["pennkey"] == "testuser"
    assert j["body_bytes"] == 5 and j["method"] == "POST"
    time.sleep(1.1)
    r = call(idp.endpoint("/api/me"), bearer=tok["access_token"])
    assert r.status == 401 and r.json()["error"] == "invalid_token"
    assert r.header("WWW-Authenticate").startswith("Bearer")

    ctl.set_ttl(access=300)
    tok = login(idp)
    assert call(idp.endpoint("/api/a/b"), bearer=tok["access_token"]).status == 200
    ctl.expire_all()
    assert call(idp.endpoint("/api/a/b"), bearer=tok["access_token"]).status == 401
    assert call(idp.endpoint("/api/a/b")).status == 401
    assert ctl.api_counters() == {"calls": 5, "ok": 2, "unauthorized": 3}


def test_down_mode_answers_503_and_comes_back(idp, ctl, disco):
    tok = login(idp)
    ctl.down()
    for url in (idp.discovery_url, idp.endpoint("/jwks"), idp.endpoint("/api/me")):
        r = call(url, bearer=tok["access_token"])
        assert r.status == 503 and r.json()["error"] == "temporarily_unavailable"
    assert refresh(idp, tok["refresh_token"]).status == 503
    assert ctl.state()["down"]["status"] == 503  # the control API is never down
    ctl.up()
    assert refresh(idp, tok["refresh_token"]).status == 200
    # only some endpoints
    ctl.down(status=500, endpoints=["token"])
    assert call(idp.discovery_url).status == 200
    assert token(idp, {"grant_type": "client_credentials"},
                 basic=(idp.confidential_client_id, idp.confidential_client_secret)).status == 500
    assert ctl.counters()["down_rejections"] == {"discovery": 1, "jwks": 1, "api": 1, "token": 2}


def test_offline_refuses_connections_and_reopens_on_the_same_port(idp, ctl):
    ctl.offline()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", idp.port), timeout=2).close()
    assert ctl.state()["online"] is False
    ctl.online()
    assert call(idp.discovery_url).status == 200

    # a kept-alive connection is dropped too, and the timer reopens the port
    conn = http.client.HTTPConnection("127.0.0.1", idp.port, timeout=5)
    conn.request("GET", "/jwks")
    assert conn.getresponse().read()
    ctl.offline(seconds=0.5)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("GET", "/jwks")
        conn.getresponse().read()
    conn.close()
    deadline = time.monotonic() + 5
    while True:
        try:
            assert call(idp.discovery_url).status == 200
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert ctl.state()["online"] is True


def test_single_flight_measure_and_delay(idp, ctl):
    ctl.delay(token=0.3)
    basic = (idp.confidential_client_id, idp.confidential_client_secret)
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        token(idp, {"grant_type": "client_credentials"}, basic=basic).status)) for _ in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 4
    assert time.monotonic() - started < 1.0  # the delay is taken concurrently
    assert ctl.max_concurrent("client_credentials") >= 2
    assert ctl.token_calls() == 4


def test_issued_secrets_are_listed(idp, ctl):
    tok = login(idp)
    new = refresh(idp, tok["refresh_token"]).json()
    secrets = set(ctl.secrets())
    for value in (tok["access_token"], tok["refresh_token"], tok["id_token"],
                  new["access_token"], new["refresh_token"], new["id_token"], idp.confidential_client_secret):
        assert value in secrets
    kinds = {i["kind"] for i in ctl.issued()}
    assert kinds == {"authorization_code", "access_token", "refresh_token", "id_token"}
    assert [i["value"] for i in ctl.issued("id_token")] == [tok["id_token"], new["id_token"]]


def test_control_rejects_bad_input(idp, ctl):
    with pytest.raises(ControlError) as e:
        ctl.switches(no_such_switch=1)
    assert e.value.status == 400
    with pytest.raises(ControlError) as e:
        ctl.expire("no-such-token")
    assert e.value.status == 404


def test_concurrent_refreshes_of_one_token_only_one_wins(idp, ctl):
    """Rotation is atomic: a client that is not single-flight gets invalid_grant for all but one."""
    tok = login(idp)
    ctl.delay(token=0.2)
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(refresh(idp, tok["refresh_token"]).status))
               for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 400, 400, 400, 400]
    assert ctl.max_concurrent("refresh_token") >= 2
    assert ctl.token_results("refresh_token") == {"ok": 1, "invalid_grant": 4}


def test_refresh_token_lifetime(idp, ctl):
    ctl.set_ttl(refresh=1)
    tok = login(idp)
    time.sleep(1.1)
    r = refresh(idp, tok["refresh_token"])
    assert r.status == 400 and r.json()["error"] == "invalid_grant"


def test_offline_requested_on_the_main_port_itself(idp, ctl):
    from idp.control import IdPControl

    assert IdPControl(idp.issuer).offline(seconds=0.3)["online"] is False
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", idp.port), timeout=2).close()
    ctl.wait_for(lambda c: c.state()["online"], timeout=5)
    assert call(idp.discovery_url).status == 200
