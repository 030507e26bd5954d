"""Service identity without shared secrets, tokens bound to their audience, TLS per provider and
route (issue 44; README "Service identity and audiences"), against the Authlib test IdP extended
with private_key_jwt, tls_client_auth and the RFC 8693 token-exchange grant (idp/identity.py):

- each token-endpoint client authentication obtains tokens: client_secret_post, private_key_jwt
  signed by the proxy (ES256 and RS256, a fresh jti each time, the key file rotated), a
  ready-made assertion read again from its file, tls_client_auth with a client certificate;
- `resource` and `audience` go with the provider's token requests;
- each token-exchange route gets a token for its own audience, exchanged once (single-flight)
  and kept until near expiry, a new one after the subject token changed, and a refused
  exchange is a JSON error with no request upstream (never the subject token);
- a route's `tls` trusts its own CA and shows its own client certificate (nginx requiring one);
- config errors name the key; no key, assertion or token reaches the log.

    cd Tests/Integration && python3 -m pytest -q test_service_identity.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import ssl
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, RSAKey

from credentials_support import (  # noqa: F401  (fixtures)
    assert_no_secrets_logged,
    free_port,
    idp_factory,
    launch,
    login,
    proxy_debug_logs,
    wait_until,
)
from proxy import run_cli

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
CLIENT_ID = "workload"

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl (scripts/setup.sh)")


# --------------------------------------------------------------------------- keys and certificates


def private_key(kind: str):
    if kind == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ES384":
        return ec.generate_private_key(ec.SECP384R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_jwk(key, kid: str) -> dict:
    text = key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    cls = ECKey if isinstance(key, ec.EllipticCurvePrivateKey) else RSAKey
    return cls.import_key(text, parameters={"kid": kid}).as_dict(private=False)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(directory: Path) -> dict:
    """A private CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    d = {name: directory / name for name in ("ca.key", "ca.pem", "server.key", "server.pem", "client.key",
                                             "client.pem")}
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d["ca.key"]), "-out", str(d["ca.pem"]),
            "-days", "2", "-subj", "/CN=platform-proxy private test CA")
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
                     ("client", "extendedKeyUsage=clientAuth\n")):
        (directory / f"{who}.ext").write_text("basicConstraints=CA:FALSE\n" + ext)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d[f"{who}.key"]),
                "-out", str(directory / f"{who}.csr"), "-subj", f"/CN={who}.workload.test")
        openssl("x509", "-req", "-in", str(directory / f"{who}.csr"), "-CA", str(d["ca.pem"]),
                "-CAkey", str(d["ca.key"]), "-CAcreateserial", "-out", str(d[f"{who}.pem"]), "-days", "2",
                "-extfile", str(directory / f"{who}.ext"))
    # A certificate for a DNS name only (no IP address): verified only under its serverName.
    (directory / "named.ext").write_text("basicConstraints=CA:FALSE\nsubjectAltName=DNS:orders.internal\n"
                                         "extendedKeyUsage=serverAuth\n")
    d["named.key"], d["named.pem"] = directory / "named.key", directory / "named.pem"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d["named.key"]), "-out", str(directory / "named.csr"),
            "-subj", "/CN=orders.internal")
    openssl("x509", "-req", "-in", str(directory / "named.csr"), "-CA", str(d["ca.pem"]), "-CAkey", str(d["ca.key"]),
            "-CAcreateserial", "-out", str(d["named.pem"]), "-days", "2", "-extfile", str(directory / "named.ext"))
    return d


def fingerprint(cert: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


# --------------------------------------------------------------------------- helpers


def register(idp, client_id=CLIENT_ID, methods=("private_key_jwt",), **spec):
    idp.control.add_client(client_id, None, grant_types=["client_credentials", TOKEN_EXCHANGE],
                           token_endpoint_auth_methods=list(methods), scope="read write", **spec)


def service_provider(idp, **extra) -> dict:
    provider = {"grant": "client_credentials", "tokenEndpoint": idp.issuer + "/token", "clientID": CLIENT_ID,
                "scopes": ["read"], "refreshBeforeExpirySeconds": 1, "minRefreshIntervalSeconds": 0}
    provider.update(extra)
    return provider


def api_route(idp, name="api", **extra) -> dict:
    return {"name": name, "path": f"/{name}/", "upstream": idp.issuer + "/api/", "credential": "access_token",
            "timeoutSeconds": 10, **extra}


def token_calls(idp, grant_type):
    return [c for c in idp.control.token_call_log() if c["grant_type"] == grant_type]


# --------------------------------------------------------------------------- client authentication


@pytest.mark.parametrize("algorithm", ["ES256", "RS256"])
def test_private_key_jwt_signs_a_fresh_assertion_per_request_and_follows_a_rotated_key(
        algorithm, start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=2)
    first = private_key(algorithm)
    register(idp, jwks={"keys": [public_jwk(first, "key-1")]})
    key_file = tmp_path / "workload.key"
    key_file.write_text(pem(first))
    provider = service_provider(idp, privateKey={"file": str(key_file)}, keyID="key-1",
                                resource=["https://orders.example.test/", "urn:example:billing"],
                                audience="platform-apis")
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=[api_route(idp)])
    p.wait_state("logged_in", timeout=10)
    r = p.call("/api/whoami")
    assert r.status == 200 and r.json()["client_id"] == CLIENT_ID, r

    calls = token_calls(idp, "client_credentials")
    assert calls and calls[0]["status"] == 200 and calls[0]["auth_method"] == "private_key_jwt", calls
    # resource (RFC 8707, both) and audience on the token request
    assert calls[0]["resource"] == ["https://orders.example.test/", "urn:example:billing"], calls[0]
    assert calls[0]["audience"] == "platform-apis", calls[0]

    # A refresh every second (2 s tokens): one new assertion each time.
    wait_until(lambda: len(idp.control.assertions()) >= 3, timeout=10, what="three token requests")
    assertions = idp.control.assertions()
    for a in assertions:
        h, c = a["header"], a["claims"]
        assert h["alg"] == algorithm and h["kid"] == "key-1" and h["typ"] == "JWT", h
        assert c["iss"] == c["sub"] == CLIENT_ID, c
        assert c["aud"] == idp.issuer + "/token", c
        assert 0 < c["exp"] - c["iat"] <= 60, c
    assert len({a["claims"]["jti"] for a in assertions}) == len(assertions), "a jti was reused"

    # Key rotation under the same kid: the IdP knows only the new key from now on, and the
    # proxy reads the key file again for its next token request.
    second = private_key(algorithm)
    register(idp, jwks={"keys": [public_jwk(second, "key-1")]})
    key_file.write_text(pem(second))
    rotated_at = time.time()
    accepted_after = lambda: [c for c in token_calls(idp, "client_credentials")  # noqa: E731
                              if c["at"] > rotated_at + 0.1 and c["status"] == 200]
    wait_until(accepted_after, timeout=15, what="a token request signed with the rotated key")
    assert p.call("/api/after-rotation").status == 200
    assert_no_secrets_logged(idp, [p], extra=[pem(first).splitlines()[1], pem(second).splitlines()[1]])


def claims_of(jwt: str) -> dict:
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def signed_assertion(key, kid: str, audience: str, lifetime: int = 300) -> str:
    now = int(time.time())
    claims = {"iss": CLIENT_ID, "sub": CLIENT_ID, "aud": audience, "jti": uuid.uuid4().hex,
              "iat": now, "exp": now + lifetime}
    jwk = ECKey.import_key(pem(key))
    return jose_jwt.encode({"alg": "ES256", "kid": kid}, claims, jwk)


def test_client_assertion_file_is_read_again_for_each_token_request(start_proxy, idp_factory, tmp_path):
    """The Kubernetes projected-token case: the kubelet rewrites the file; the IdP refuses a jti it saw."""
    idp = idp_factory(access_ttl=2)
    key = private_key("ES256")
    register(idp, jwks={"keys": [public_jwk(key, "projected")]})
    assertion_file = tmp_path / "token"
    first = signed_assertion(key, "projected", idp.issuer + "/token")
    assertion_file.write_text(first + "\n")
    provider = service_provider(idp, tokenEndpointAuthMethod="private_key_jwt",
                                clientAssertion={"file": str(assertion_file)})
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=[api_route(idp)])
    p.wait_state("logged_in", timeout=10)
    assert p.call("/api/one").status == 200
    jtis = lambda: [a["claims"]["jti"] for a in idp.control.assertions()]  # noqa: E731
    assert jtis()[0] == claims_of(first)["jti"]

    # The file is rotated: the next token request carries the new assertion.
    second = signed_assertion(key, "projected", idp.issuer + "/token")
    assertion_file.write_text(second)
    second_jti = claims_of(second)["jti"]
    wait_until(lambda: second_jti in jtis(), timeout=10, what="the rotated assertion at the IdP")
    ok = [c for c in token_calls(idp, "client_credentials") if c["status"] == 200]
    assert len(ok) >= 2, ok
    assert p.call("/api/two").status == 200
    assert_no_secrets_logged(idp, [p], extra=[first, second])


def test_client_secret_post_sends_the_secret_in_the_form(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    idp.control.add_client("poster", "poster-secret-4d1c9e", grant_types=["client_credentials"],
                           token_endpoint_auth_methods=["client_secret_post"], scope="read")
    provider = service_provider(idp, clientID="poster", clientSecret="poster-secret-4d1c9e",
                                tokenEndpointAuthMethod="client_secret_post")
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=[api_route(idp)])
    p.wait_state("logged_in", timeout=10)
    (call,) = token_calls(idp, "client_credentials")
    assert call["status"] == 200 and call["auth_method"] == "client_secret_post", call
    assert p.call("/api/x").json()["client_id"] == "poster"
    assert_no_secrets_logged(idp, [p])


@needs_openssl
def test_tls_client_auth_presents_the_client_certificate_at_a_private_ca_token_endpoint(
        start_proxy, idp_factory, tmp_path, monkeypatch):
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    pki = make_pki(tmp_path / "pki")
    idp = idp_factory(tls_port=0, tls_cert=pki["server.pem"], tls_key=pki["server.key"], tls_client_ca=pki["ca.pem"])
    register(idp, methods=("tls_client_auth",), tls_client_cert_sha256=fingerprint(pki["client.pem"]))
    provider = service_provider(idp, tokenEndpoint=f"https://127.0.0.1:{idp.tls_port}/token",
                                tokenEndpointAuthMethod="tls_client_auth",
                                tls={"caFile": str(pki["ca.pem"]), "clientCertificate": str(pki["client.pem"]),
                                     "clientKey": {"file": str(pki["client.key"])}})
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=[api_route(idp)])
    p.wait_state("logged_in", timeout=10)
    (call,) = token_calls(idp, "client_credentials")
    assert call["status"] == 200 and call["auth_method"] == "tls_client_auth" and call["client_id"] == CLIENT_ID, call
    assert p.call("/api/x").json()["client_id"] == CLIENT_ID
    assert_no_secrets_logged(idp, [p], extra=[pki["client.key"].read_text().splitlines()[1]])


# --------------------------------------------------------------------------- token exchange


def exchange_routes(idp):
    return [api_route(idp, "orders", tokenExchange={"audience": "orders", "resource": ["https://orders.example.test/"]}),
            api_route(idp, "billing", tokenExchange={"audience": "billing", "scope": ["read"]}),
            api_route(idp, "denied", tokenExchange={"audience": "nobody"}),
            api_route(idp, "plain")]


def echo(p, route):
    r = p.call(f"/{route}/who?echo=1")
    assert r.status == 200, r
    return r.json()


def test_each_route_gets_a_token_exchanged_for_its_own_audience(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    idp.control.switches(deny_exchange_audiences=["nobody"])
    idp.control.delay(token=0.3)
    provider = service_provider(idp, clientID=idp.confidential_client_id, clientSecret=idp.confidential_client_secret,
                                refreshBeforeExpirySeconds=60)
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=exchange_routes(idp))
    p.wait_state("logged_in", timeout=10)
    subject = idp.control.tokens()[0]

    # Concurrent first requests on one route: one exchange (single-flight).
    replies = []
    threads = [threading.Thread(target=lambda: replies.append(p.call("/orders/who?echo=1"))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert [r.status for r in replies] == [200] * 6, replies
    assert len(token_calls(idp, TOKEN_EXCHANGE)) == 1, token_calls(idp, TOKEN_EXCHANGE)

    orders, billing, plain = echo(p, "orders"), echo(p, "billing"), echo(p, "plain")
    assert orders["audience"] == "orders" and orders["resource"] == ["https://orders.example.test/"], orders
    assert billing["audience"] == "billing" and billing["scope"] == "read", billing
    assert orders["exchanged_from"] == billing["exchanged_from"] == subject["seq"]
    assert plain["audience"] is None and plain["token_seq"] == subject["seq"], plain
    # Three different tokens: neither exchange route sees the other's, nor the provider's own.
    tokens = {orders["token_seq"], billing["token_seq"], plain["token_seq"]}
    assert len(tokens) == 3, tokens
    assert all(r.json()["token_seq"] == orders["token_seq"] for r in replies)
    # An echo of an exchanged token is masked like any injected token (maskEchoedCredentials).
    for got in (orders, billing, plain):
        scheme, _, masked = got["authorization"].partition(" ")
        assert scheme == "Bearer" and len(masked) > 20 and set(masked) == {"*"}, got
    # Kept: more requests, no more exchanges.
    for _ in range(3):
        assert echo(p, "orders")["token_seq"] == orders["token_seq"]
        assert echo(p, "billing")["token_seq"] == billing["token_seq"]
    calls = token_calls(idp, TOKEN_EXCHANGE)
    assert len(calls) == 2 and {c["audience"] for c in calls} == {"orders", "billing"}, calls

    # A refused exchange: a JSON error, and nothing reaches the upstream.
    api_before = len(idp.control.api_call_log())
    r = p.call("/denied/who?echo=1")
    assert r.status == 502, r
    body = r.json()
    assert body["error"] == "token_exchange_refused" and "invalid_target" in body["message"], body
    assert subject["access_token"] not in r.body.decode()
    assert len(idp.control.api_call_log()) == api_before, "the refused route's request went upstream"
    assert_no_secrets_logged(idp, [p])


def test_exchanged_tokens_follow_a_new_subject_token_and_their_own_expiry(start_proxy, idp_factory, tmp_path):
    # Every token lives 3 s: the provider's is refreshed a second before it expires, the
    # route's exchanged again past half its life, and after every new subject token.
    idp = idp_factory(access_ttl=3)
    provider = service_provider(idp, clientID=idp.confidential_client_id, clientSecret=idp.confidential_client_secret,
                                refreshBeforeExpirySeconds=1)
    p = launch(start_proxy, idp, tmp_path, provider=provider, routes=exchange_routes(idp))
    p.wait_state("logged_in", timeout=10)
    first = echo(p, "orders")
    seen = {first["token_seq"]}
    deadline = time.monotonic() + 8
    subjects = set()
    while time.monotonic() < deadline and len(subjects) < 2:
        got = echo(p, "orders")
        assert got["audience"] == "orders", got
        seen.add(got["token_seq"])
        subjects.add(got["exchanged_from"])
        time.sleep(0.2)
    # The subject token was refreshed: the route's token was exchanged from the new one.
    assert len(subjects) >= 2, subjects
    assert len(seen) >= 3, seen
    # Never an expired (401) or a shared token upstream.
    api = [c for c in idp.control.api_call_log() if c["path"].startswith("/api/who")]
    assert api and all(c["status"] == 200 for c in api), api
    tokens = {t["seq"]: t for t in idp.control.tokens()}
    assert all(tokens[c["seq"]]["audience"] == "orders" for c in api), api
    assert_no_secrets_logged(idp, [p])


def test_a_user_login_exchanges_per_route_and_a_logout_drops_the_exchanged_tokens(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, routes=exchange_routes(idp))
    login(p)
    before = echo(p, "orders")
    assert before["audience"] == "orders" and before["user"]["sub"] == "user-1", before
    assert p.call("/_platform/logout", method="POST").status == 200
    r = p.call("/orders/who?echo=1")
    assert r.status == 401 and r.json()["error"] == "awaiting_authorization", r
    assert len(token_calls(idp, TOKEN_EXCHANGE)) == 1
    login(p)
    after = echo(p, "orders")
    # A new login: a token exchanged from the new subject token, never the previous login's.
    assert after["token_seq"] != before["token_seq"], after
    assert after["exchanged_from"] != before["exchanged_from"], (before, after)
    assert len(token_calls(idp, TOKEN_EXCHANGE)) == 2
    assert_no_secrets_logged(idp, [p])


# --------------------------------------------------------------------------- TLS per route


@needs_openssl
@pytest.mark.skipif(shutil.which("nginx") is None, reason="needs nginx (scripts/setup.sh)")
def test_route_tls_trusts_its_private_ca_and_shows_its_client_certificate(start_proxy, tmp_path, monkeypatch):
    from test_tls_upstream import TLSNginx  # noqa: PLC0415

    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    pki = make_pki(tmp_path / "pki")
    nginx_dir = tmp_path / "nginx"
    nginx = TLSNginx(nginx_dir, pki["server.pem"], pki["server.key"], redirect_to="http://127.0.0.1:9/",
                     upload_to="http://127.0.0.1:9/")
    try:
        # Require a client certificate from the private CA, and echo its subject.
        conf = nginx.conf.read_text().replace(
            "        default_type application/json;",
            f"        default_type application/json;\n        ssl_client_certificate {pki['ca.pem']};\n"
            "        ssl_verify_client optional;\n"
            "        if ($ssl_client_verify != SUCCESS) { return 495 '{\"client\":\"$ssl_client_verify\"}'; }")
        conf = conf.replace('"xAuthorization":"$http_x_authorization"}', '"client":"$ssl_client_s_dn"}')
        nginx.conf.write_text(conf)
        subprocess.run(["nginx", "-p", str(nginx_dir), "-c", str(nginx.conf), "-s", "reload"], check=True,
                       capture_output=True)
        time.sleep(0.5)
        upstream = f"https://127.0.0.1:{nginx.port}/"
        tls = {"caFile": str(pki["ca.pem"]), "clientCertificate": str(pki["client.pem"]),
               "clientKey": {"file": str(pki["client.key"])}}
        config = {"listen": [f"127.0.0.1:{free_port()}"], "stateDirectory": str(tmp_path / "state"),
                  "routes": [
                      {"name": "mtls", "path": "/mtls/", "upstream": upstream, "tls": tls, "timeoutSeconds": 10},
                      {"name": "caonly", "path": "/caonly/", "upstream": upstream,
                       "tls": {"caFile": str(pki["ca.pem"])}, "timeoutSeconds": 10},
                      {"name": "default", "path": "/default/", "upstream": upstream, "timeoutSeconds": 10},
                  ]}
        proxy = start_proxy(config)
        r = proxy.get("/mtls/whoami")
        assert r.status == 200, r
        assert "CN=client.workload.test" in json.loads(r.body)["client"], r
        # The same upstream without the route's client certificate: nginx refuses.
        r = proxy.get("/caonly/whoami")
        assert r.status == 495 and json.loads(r.body)["client"] == "NONE", r
        # Without the route's CA the private certificate is not trusted: no request at all.
        r = proxy.get("/default/whoami")
        assert r.status == 502 and json.loads(r.body)["error"] == "upstream_unreachable", r
        # And the mTLS route again, after the handles served the others.
        assert proxy.get("/mtls/again").status == 200
        assert pki["client.key"].read_text().splitlines()[1] not in proxy.stderr_text()
    finally:
        nginx.stop()


@needs_openssl
@pytest.mark.skipif(shutil.which("nginx") is None, reason="needs nginx (scripts/setup.sh)")
def test_route_tls_server_name_verifies_the_certificate_under_that_name(start_proxy, tmp_path, monkeypatch):
    from test_tls_upstream import TLSNginx  # noqa: PLC0415

    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    pki = make_pki(tmp_path / "pki")
    nginx = TLSNginx(tmp_path / "nginx", pki["named.pem"], pki["named.key"], redirect_to="http://127.0.0.1:9/",
                     upload_to="http://127.0.0.1:9/")
    try:
        upstream = f"https://127.0.0.1:{nginx.port}/"
        config = {"listen": [f"127.0.0.1:{free_port()}"], "stateDirectory": str(tmp_path / "state"),
                  "routes": [
                      {"name": "named", "path": "/named/", "upstream": upstream, "timeoutSeconds": 10,
                       "tls": {"caFile": str(pki["ca.pem"]), "serverName": "orders.internal"}},
                      {"name": "unnamed", "path": "/unnamed/", "upstream": upstream, "timeoutSeconds": 10,
                       "tls": {"caFile": str(pki["ca.pem"])}},
                  ]}
        proxy = start_proxy(config)
        r = proxy.get("/named/whoami")
        assert r.status == 200 and json.loads(r.body)["protocol"] == "HTTP/2.0", r
        # The certificate names orders.internal, not 127.0.0.1: refused without the serverName.
        r = proxy.get("/unnamed/whoami")
        assert r.status == 502 and json.loads(r.body)["error"] == "upstream_unreachable", r
        assert proxy.get("/named/again").status == 200
    finally:
        nginx.stop()


# --------------------------------------------------------------------------- config errors


def check_config(tmp_path, provider=None, routes=None) -> subprocess.CompletedProcess:
    config = {"listen": ["127.0.0.1:0"], "stateDirectory": str(tmp_path / "state"),
              "routes": routes or [{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/",
                                    "credential": "access_token"}]}
    if provider is not None:
        config["provider"] = provider
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(config))
    return run_cli("check-config", "--config", str(path))


@needs_openssl
def test_config_errors_name_the_key_and_never_show_it(tmp_path):
    pki = make_pki(tmp_path / "pki")
    base = {"grant": "client_credentials", "tokenEndpoint": "https://idp.example.test/token", "clientID": CLIENT_ID}
    p384 = tmp_path / "p384.key"
    p384.write_text(pem(private_key("ES384")))
    other = tmp_path / "other.key"
    other.write_text(pem(private_key("RS256")))
    cases = [
        ({**base, "privateKey": {"file": str(pki["client.pem"])}}, None,
         "provider.privateKey", "is not a PEM private key"),
        ({**base, "privateKey": {"file": str(p384)}}, None, "provider.privateKey", "P-256"),
        ({**base, "tokenEndpointAuthMethod": "tls_client_auth",
          "tls": {"clientCertificate": str(pki["client.pem"]), "clientKey": {"file": str(other)}}}, None,
         "provider.tls.clientKey", "does not match the certificate"),
        ({**base, "tokenEndpointAuthMethod": "private_key_jwt"}, None, "provider", "needs \"privateKey\""),
        ({**base, "tokenEndpointAuthMethod": "client_secret_post"}, None, "provider.clientSecret", "is required"),
        ({**base, "clientSecret": "s3cret-value", "resource": ["not a uri"]}, None, "provider.resource[0]",
         "absolute URI"),
        ({**base, "clientSecret": "s3cret-value"},
         [{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/", "credential": "jwt",
           "tokenExchange": {"audience": "x"}}], "routes[0].tokenExchange", "access_token"),
        ({**base, "clientSecret": "s3cret-value"},
         [{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/", "tls": {"clientKey": "k"}}],
         "routes[0].tls.clientCertificate", "is required"),
    ]
    for provider, routes, key, words in cases:
        result = check_config(tmp_path, provider, routes)
        assert result.returncode != 0, (key, result.stdout, result.stderr)
        out = result.stdout + result.stderr
        assert key in out and words in out, (key, words, out)
        for secret in (p384, other, pki["client.key"]):
            assert secret.read_text().splitlines()[1] not in out
