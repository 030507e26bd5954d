"""Client authentication without shared secrets, audiences and RFC 8693 token exchange for the
test IdP (``idp.server``), as Authlib extensions:

- ``private_key_jwt`` (RFC 7523 §2.2): Authlib's ``JWTBearerClientAssertion``, checking the
  assertion against the client's ``jwks`` (ES256 or RS256), ``aud`` = the token endpoint (or
  the issuer), a ``jti`` never seen before. Every assertion received is recorded (header and
  claims under ``/_test/assertions``; the value itself among ``/_test/secrets``).
- ``tls_client_auth`` (RFC 8705 §2.1): the client certificate of the TLS connection (the IdP's
  ``--tls-port``) must have the SHA-256 fingerprint registered as the client's
  ``tls_client_cert_sha256``.
- ``urn:ietf:params:oauth:grant-type:token-exchange`` (RFC 8693): a live access token of any
  client is exchanged for a new one carrying the ``audience`` and ``resource`` asked for (shown
  by ``/api/``); the switch ``deny_exchange_audiences`` refuses some with ``invalid_target``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import time

from flask import request as flask_request
from joserfc.jwk import KeySet

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.errors import InvalidClientError, InvalidRequestError, UnauthorizedClientError
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
EXTRA_AUTH_METHODS = ["private_key_jwt", "tls_client_auth"]


def _b64json(part: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


class PrivateKeyJWT(JWTBearerClientAssertion):
    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, idp):
        super().__init__(leeway=5)
        self.idp = idp

    def get_audiences(self):
        issuers = [self.idp.issuer] + ([self.idp.tls_issuer] if self.idp.tls_issuer else [])
        return [i + "/token" for i in issuers] + issuers

    def validate_jti(self, claims, jti):
        with self.idp.lock:
            key = (claims["sub"], jti)
            if key in self.idp.seen_jti:
                return False
            self.idp.seen_jti.add(key)
            return True

    def resolve_client_public_key(self, client):
        if not client.jwks:
            raise InvalidClientError(description="the client has no jwks")
        return KeySet.import_key_set(client.jwks)

    def __call__(self, query_client, request):
        assertion = request.form.get("client_assertion")
        if assertion and assertion.count(".") == 2:
            head, body, _ = assertion.split(".")
            try:
                record = {"header": _b64json(head), "claims": _b64json(body), "at": time.time()}
            except ValueError:
                record = {"header": None, "claims": None, "at": time.time()}
            with self.idp.lock:
                self.idp._append(self.idp.assertions, record)
                self.idp.record_issued("client_assertion", assertion, request.form.get("grant_type"),
                                       (record["claims"] or {}).get("sub"))
        return super().__call__(query_client, request)


def tls_client_auth(query_client, request):
    """RFC 8705 §2.1 (the certificate-bound variant: the registered fingerprint)."""
    client_id = request.form.get("client_id")
    pem = flask_request.environ.get("SSL_CLIENT_CERT")
    if not client_id or not pem:
        return None
    client = query_client(client_id)
    if client is None or not client.tls_client_cert_sha256:
        return None
    fingerprint = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()
    if fingerprint != client.tls_client_cert_sha256.lower().replace(":", ""):
        raise InvalidClientError(description="the TLS client certificate is not the client's")
    return client


class TokenExchangeGrant(grants.BaseGrant, grants.TokenEndpointMixin):
    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"] + EXTRA_AUTH_METHODS

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError(f"The client is not authorized to use 'grant_type={self.GRANT_TYPE}'")
        data = self.request.form
        if data.get("subject_token_type") != ACCESS_TOKEN_TYPE:
            raise InvalidRequestError("subject_token_type must be " + ACCESS_TOKEN_TYPE)
        if data.get("requested_token_type") not in (None, ACCESS_TOKEN_TYPE):
            raise InvalidRequestError("only access tokens are issued")
        idp = self.server.idp
        with idp.lock:
            subject = idp.tokens_by_access.get(data.get("subject_token") or "")
            if subject is None or not subject.access_live():
                raise OAuth2Error(error="invalid_grant", description="the subject token is not live", status_code=400)
            audience = data.get("audience")
            if audience and audience in idp.switches["deny_exchange_audiences"]:
                raise OAuth2Error(error="invalid_target", description=f"no tokens for audience {audience}",
                                  status_code=400)
        self.request.client = client
        self.request.user = subject.get_user()
        self.subject = subject

    def create_token_response(self):
        data = self.request.form
        scope = data.get("scope") or self.subject.scope
        token = self.generate_token(scope=scope, user=self.request.user, include_refresh_token=False)
        self.save_token(token)
        idp = self.server.idp
        with idp.lock:
            tok = idp.tokens_by_access[token["access_token"]]
            tok.audience = data.get("audience")
            tok.resource = data.getlist("resource") if hasattr(data, "getlist") else [data.get("resource")]
            tok.exchanged_from = self.subject.seq
        token["issued_token_type"] = ACCESS_TOKEN_TYPE
        return 200, token, self.TOKEN_RESPONSE_HEADER


def auth_method_of(req) -> str:
    """The client authentication a token request used, as recorded in ``/_test/token_calls``."""
    if req.form.get("client_assertion"):
        return "private_key_jwt"
    if req.authorization is not None:
        return "client_secret_basic"
    if req.form.get("client_secret"):
        return "client_secret_post"
    if req.environ.get("SSL_CLIENT_CERT"):
        return "tls_client_auth"
    return "none"


def register(server, idp):
    server.register_client_auth_method("private_key_jwt", PrivateKeyJWT(idp))
    server.register_client_auth_method("tls_client_auth", tls_client_auth)
    server.register_grant(TokenExchangeGrant)
