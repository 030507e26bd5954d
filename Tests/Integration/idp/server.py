"""A real OAuth 2 / OpenID Connect authorization server on loopback, for tests.

Everything that is protocol is Authlib's (``authlib.integrations.flask_oauth2``
and the ``authlib.oauth2`` / ``authlib.oidc`` grants, endpoints and
extensions): the authorization and token endpoints, client authentication
(``none``, ``client_secret_basic``, ``client_secret_post``), the
authorization-code grant with PKCE (``CodeChallenge``, S256 only), refresh with
rotation (``RefreshTokenGrant`` issuing a new refresh token and revoking the old
one), client credentials, the device authorization grant (RFC 8628), token
revocation (RFC 7009), userinfo, and OIDC id_tokens (RS256, JWKS published).
This module only supplies in-memory models (plain classes under one lock), the
discovery document, a protected test resource under ``/api/`` and the test
switches under ``/_test/``.

Run from ``Tests/Integration``::

    python3 -m idp.server --port 0 --access-ttl 2 --refresh-ttl 60

It prints one JSON line to stdout when it accepts connections::

    {"event": "listening", "port": 41234, "control_port": 41235,
     "issuer": "http://127.0.0.1:41234", "pid": 123}

``port`` serves everything (OAuth endpoints, ``/api/``, ``/_test/``);
``control_port`` serves ``/_test/`` only and stays up while the main port is
offline (``POST /_test/offline``). See ``idp.control`` for a client.

Endpoints (issuer ``http://127.0.0.1:<port>``):

- ``GET /.well-known/openid-configuration`` (also ``/.well-known/oauth-authorization-server``)
- ``GET /jwks``
- ``GET /authorize``: no login page: the fixed user approves at once, 302 to
  ``redirect_uri`` with ``code`` and ``state`` (or ``error=access_denied`` when
  the ``deny_next`` switch is set)
- ``POST /token``: authorization_code, refresh_token, client_credentials,
  urn:ietf:params:oauth:grant-type:device_code
- ``POST /revoke`` (RFC 7009), ``POST /device_authorization`` (RFC 8628),
  ``GET /device?user_code=...`` (the verification URI: approves like /authorize)
- ``GET|POST /userinfo`` (Bearer, scope ``openid``)
- ``ANY /api/...``: 200 JSON with the user and path for a live access token, else 401
  (``?echo=1`` adds the ``Authorization`` it received, as a debug endpoint would)

Test switches: see the docstring of ``control_routes`` below and ``idp.control``.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import signal
import socket
import ssl
import sys
import threading
import time
from collections import Counter, defaultdict

from flask import Flask, Response, g, jsonify, request
from joserfc.jwk import RSAKey
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6749.errors import InvalidRequestError
from authlib.oauth2.rfc6749.util import list_to_scope, scope_to_list
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE,
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialDict,
)
from authlib.common.security import generate_token
from authlib.oidc.core import AuthorizationCodeMixin, OpenIDCode, OpenIDToken, UserInfo, UserInfoEndpoint
from authlib.oidc.discovery import OpenIDProviderMetadata

from idp.identity import TOKEN_EXCHANGE, auth_method_of
from idp.identity import register as register_identity

log = logging.getLogger("idp")

# --------------------------------------------------------------------------- defaults

DEFAULT_SCOPE = "openid profile email offline_access read write introspection"
LOOPBACK_CALLBACK_PATTERN = r"http://(127\.0\.0\.1|localhost|\[::1\]):[0-9]{1,5}/_platform/callback"
GRANT_ALIASES = {"device_code": DEVICE_CODE_GRANT_TYPE, "device": DEVICE_CODE_GRANT_TYPE}
ALL_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none", "private_key_jwt", "tls_client_auth"]
MAX_EVENTS = 20000  # bound on every event list kept for the tests

DEFAULT_USER = {
    "sub": "user-1",
    "pennkey": "testuser",
    "name": "Test User",
    "email": "testuser@example.test",
}


def _grant_type(name: str) -> str:
    return GRANT_ALIASES.get(name, name)


def _now() -> float:
    return time.time()


# --------------------------------------------------------------------------- models


class User:
    def __init__(self, claims: dict):
        self.claims = dict(claims)
        self.id = self.claims["sub"]

    def get_user_id(self):
        return self.id

    def userinfo(self) -> UserInfo:
        info = UserInfo(self.claims)
        info.setdefault("preferred_username", self.claims.get("pennkey"))
        return info


class Client(ClientMixin):
    """A registered client. Public when it has no secret (auth method ``none``)."""

    def __init__(self, client_id, client_secret=None, redirect_uris=(), redirect_uri_patterns=None,
                 grant_types=None, response_types=("code",), scope=DEFAULT_SCOPE,
                 token_endpoint_auth_methods=None, jwks=None, tls_client_cert_sha256=None):
        self.client_id = client_id
        self.jwks = jwks  # private_key_jwt: the public keys assertions are checked with
        self.tls_client_cert_sha256 = tls_client_cert_sha256  # tls_client_auth: the certificate's fingerprint
        self.client_secret = client_secret
        self.redirect_uris = list(redirect_uris)
        self.redirect_uri_patterns = list(
            [LOOPBACK_CALLBACK_PATTERN] if redirect_uri_patterns is None else redirect_uri_patterns)
        if grant_types is None:
            grant_types = (["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE, TOKEN_EXCHANGE]
                           if client_secret is None else
                           ["client_credentials", "authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE,
                            TOKEN_EXCHANGE])
        self.grant_types = [_grant_type(x) for x in grant_types]
        self.response_types = list(response_types)
        self.scope = scope
        if token_endpoint_auth_methods is None:
            token_endpoint_auth_methods = (["none"] if client_secret is None
                                           else ["client_secret_basic", "client_secret_post"])
        self.auth_methods = list(token_endpoint_auth_methods)
        self.client_metadata: dict = {}

    @classmethod
    def from_json(cls, spec: dict) -> "Client":
        known = {"client_id", "client_secret", "redirect_uris", "redirect_uri_patterns", "grant_types",
                 "response_types", "scope", "token_endpoint_auth_methods", "jwks", "tls_client_cert_sha256"}
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown client keys: {sorted(unknown)}")
        return cls(**spec)

    def to_json(self) -> dict:
        return {"client_id": self.client_id, "client_secret": self.client_secret,
                "public": self.is_public, "redirect_uris": self.redirect_uris,
                "redirect_uri_patterns": self.redirect_uri_patterns, "grant_types": self.grant_types,
                "response_types": self.response_types, "scope": self.scope,
                "token_endpoint_auth_methods": self.auth_methods}

    @property
    def is_public(self) -> bool:
        return self.client_secret is None

    # ClientMixin
    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope):
        if not scope:
            return ""
        allowed = set(scope_to_list(self.scope))
        return list_to_scope([s for s in scope_to_list(scope) if s in allowed])

    def check_redirect_uri(self, redirect_uri):
        if redirect_uri in self.redirect_uris:
            return True
        return any(re.fullmatch(p, redirect_uri) for p in self.redirect_uri_patterns)

    def check_client_secret(self, client_secret):
        return self.client_secret is not None and secrets.compare_digest(
            self.client_secret.encode(), str(client_secret).encode())

    def check_endpoint_auth_method(self, method, endpoint):
        return method in self.auth_methods

    def check_response_type(self, response_type):
        return response_type in self.response_types

    def check_grant_type(self, grant_type):
        return grant_type in self.grant_types


class AuthorizationCode(AuthorizationCodeMixin):
    def __init__(self, code, client_id, redirect_uri, scope, user_id, nonce, auth_time,
                 code_challenge, code_challenge_method, expires_at):
        self.code = code
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self.scope = scope
        self.user_id = user_id
        self.nonce = nonce
        self.auth_time = auth_time
        self.code_challenge = code_challenge
        self.code_challenge_method = code_challenge_method
        self.expires_at = expires_at

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time

    def is_expired(self):
        return _now() >= self.expires_at


class Token(TokenMixin):
    """One token response: an access token and (maybe) a refresh token."""

    def __init__(self, idp: "IdP", seq, client_id, user_id, scope, grant_type, access_token,
                 refresh_token, expires_in, refresh_ttl):
        self.idp = idp
        self.seq = seq
        self.client_id = client_id
        self.user_id = user_id
        self.scope = scope or ""
        self.grant_type = grant_type
        self.access_token = access_token
        self.refresh_token = refresh_token
        self.issued_at = _now()
        self.expires_in = expires_in
        self.access_expires_at = self.issued_at + expires_in if expires_in else None
        self.refresh_expires_at = (self.issued_at + refresh_ttl) if (refresh_token and refresh_ttl) else None
        self.access_revoked = False
        self.refresh_revoked = False
        self.audience = None  # token exchange: what the token was issued for
        self.resource = []
        self.exchanged_from = None  # the subject token's seq

    # TokenMixin
    def check_client(self, client):
        return client.get_client_id() == self.client_id

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return self.access_expires_at is not None and _now() >= self.access_expires_at

    def is_revoked(self):
        return self.access_revoked

    def get_user(self):
        return self.idp.users.get(self.user_id) if self.user_id else None

    def get_client(self):
        return self.idp.clients.get(self.client_id)

    def refresh_live(self) -> bool:
        return bool(self.refresh_token) and not self.refresh_revoked and (
            self.refresh_expires_at is None or _now() < self.refresh_expires_at)

    def access_live(self) -> bool:
        return not self.access_revoked and not self.is_expired()

    def to_json(self) -> dict:
        return {"seq": self.seq, "grant_type": self.grant_type, "client_id": self.client_id,
                "user_id": self.user_id, "scope": self.scope, "access_token": self.access_token,
                "refresh_token": self.refresh_token, "issued_at": self.issued_at,
                "access_expires_at": self.access_expires_at, "refresh_expires_at": self.refresh_expires_at,
                "access_revoked": self.access_revoked, "refresh_revoked": self.refresh_revoked,
                "audience": self.audience, "resource": self.resource, "exchanged_from": self.exchanged_from,
                "access_live": self.access_live(), "refresh_live": self.refresh_live()}


# --------------------------------------------------------------------------- Authlib wiring


class Server(AuthorizationServer):
    """Authlib's Flask authorization server, knowing its IdP."""

    idp: "IdP"

    def query_client(self, client_id):
        return self.idp.clients.get(client_id)

    def save_token(self, token, request):
        return self.idp.save_token(token, request)


class S256CodeChallenge(CodeChallenge):
    """Authlib's PKCE extension, restricted to S256 and required of public clients."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        super().validate_code_challenge(grant, redirect_uri)
        data = grant.request.payload.data
        if data.get("code_challenge") and data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be 'S256'")
        if self.required and grant.request.client.is_public and not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: missing 'code_challenge'")


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ALL_AUTH_METHODS

    def save_authorization_code(self, code, request):
        self.server.idp.save_code(code, request)

    def query_authorization_code(self, code, client):
        return self.server.idp.find_code(code, client)

    def delete_authorization_code(self, authorization_code):
        self.server.idp.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return self.server.idp.users.get(authorization_code.user_id)


class RefreshTokenGrant(grants.RefreshTokenGrant):
    """Rotation: every refresh issues a new refresh token and revokes the used one,
    unless the ``omit_refresh_token`` switch drops the new one (then the old one stays valid)."""

    TOKEN_ENDPOINT_AUTH_METHODS = ALL_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        tok = self.server.idp.tokens_by_refresh.get(refresh_token)
        if tok is not None and tok.refresh_live():
            return tok
        return None

    def authenticate_user(self, refresh_token):
        return self.server.idp.users.get(refresh_token.user_id)

    def issue_token(self, user, refresh_token):
        self.INCLUDE_NEW_REFRESH_TOKEN = not self.server.idp.take_switch("omit_refresh_token")
        return super().issue_token(user, refresh_token)

    def revoke_old_credential(self, refresh_token):
        if self.INCLUDE_NEW_REFRESH_TOKEN:
            self.server.idp.revoke_record(refresh_token, "refresh_token", "rotation")
            if self.server.idp.switches["revoke_access_on_refresh"]:
                self.server.idp.revoke_record(refresh_token, "access_token", "rotation")


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "tls_client_auth"]


class DeviceGrant(DeviceCodeGrant):
    def validate_token_request(self):
        device_code = self.request.payload.data.get("device_code")
        try:
            super().validate_token_request()
        except OAuth2Error as error:
            self.server.idp.record_poll(device_code, error.error)
            raise
        self.server.idp.record_poll(device_code, "approved")

    def query_device_credential(self, device_code):
        cred = self.server.idp.devices.get(device_code)
        if cred is None or cred.get("consumed"):
            return None
        return cred

    def query_user_grant(self, user_code):
        return self.server.idp.device_grants.get(user_code)

    def should_slow_down(self, credential):
        idp = self.server.idp
        last = credential.get("last_poll")
        if idp.take_switch("slow_down_next"):
            credential["interval"] += 5
            return True
        if (idp.switches["enforce_interval"] and last is not None
                and _now() - last < credential["interval"] * 0.8):
            credential["interval"] += 5
            return True
        return False

    def save_token(self, token):
        result = super().save_token(token)
        self.request.credential["consumed"] = True
        return result


class DeviceAuthorization(DeviceAuthorizationEndpoint):
    CLIENT_AUTH_METHODS = ALL_AUTH_METHODS

    @property
    def INTERVAL(self):  # noqa: N802 (Authlib's attribute name)
        return self.server.idp.ttl["device_interval"]

    @property
    def EXPIRES_IN(self):  # noqa: N802
        return self.server.idp.ttl["device_expires"]

    def get_verification_uri(self):
        return self.server.idp.issuer + "/device"

    def save_device_credential(self, client_id, scope, data):
        self.server.idp.save_device(client_id, scope, data)


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ALL_AUTH_METHODS

    def query_token(self, token_string, token_type_hint):
        return self.server.idp.find_token(token_string, token_type_hint)

    def revoke_token(self, token, request):
        idp = self.server.idp
        presented = request.form["token"]
        if presented == token.refresh_token:
            # RFC 7009 2.1: revoking a refresh token also invalidates the access token of the grant
            idp.revoke_record(token, "refresh_token", "revocation_endpoint")
            idp.revoke_record(token, "access_token", "revocation_endpoint")
            g.idp_revoked_type = "refresh_token"
        else:
            idp.revoke_record(token, "access_token", "revocation_endpoint")
            g.idp_revoked_type = "access_token"


class _OIDCKeys:
    """What Authlib's OpenIDToken / OpenIDCode ask of the application."""

    idp: "IdP"

    def resolve_client_private_key(self, client):
        return self.idp.signing_key

    def get_client_algorithm(self, client):
        return "RS256"

    def get_encode_header(self, client):
        return {"alg": "RS256", "kid": self.idp.kid, "typ": "JWT"}

    def get_client_claims(self, client):
        return {"iss": self.idp.issuer, "aud": client.get_client_id(),
                "exp": int(_now()) + int(self.idp.ttl["id_token"])}

    def generate_user_info(self, user, scope):
        return user.userinfo()

    def encode_id_token(self, token, request):
        id_token = super().encode_id_token(token, request)
        self.idp.record_issued("id_token", id_token, request.payload.grant_type, request.client.client_id)
        return id_token


class OIDCCode(_OIDCKeys, OpenIDCode):
    """id_token on the authorization-code grant (nonce from the authorization request)."""

    def __init__(self, idp: "IdP"):
        super().__init__(require_nonce=False)
        self.idp = idp

    def exists_nonce(self, nonce, request):
        return self.idp.nonce_in_use(nonce, request.payload.client_id)


class OIDCToken(_OIDCKeys, OpenIDToken):
    """id_token on the refresh and device grants; ``omit_id_token`` drops it from a refresh."""

    def __init__(self, idp: "IdP"):
        self.idp = idp

    def process_token(self, grant, response):
        if grant.GRANT_TYPE == "refresh_token" and self.idp.take_switch("omit_id_token"):
            return response[1]
        return super().process_token(grant, response)


class OIDCUserInfo(UserInfoEndpoint):
    def generate_user_info(self, user, scope):
        if user is None:  # a client_credentials token has no user
            raise InvalidRequestError("this token has no user")
        return user.userinfo()

    def get_issuer(self):
        return self.server.idp.issuer


class AccessTokenValidator(BearerTokenValidator):
    def __init__(self, idp: "IdP"):
        super().__init__()
        self.idp = idp

    def authenticate_token(self, token_string):
        return self.idp.tokens_by_access.get(token_string)


# --------------------------------------------------------------------------- the IdP state


class IdP:
    """Models, test switches and records. Every access holds ``lock``."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.lock = threading.RLock()
        self.issuer = "http://127.0.0.1"  # set once the port is known
        self.tls_issuer = None  # https://127.0.0.1:<tls port> when --tls-port serves the same app over TLS
        self.seen_jti: set = set()
        self.kid = "idp-" + generate_token(8)
        self.signing_key = RSAKey.generate_key(2048, parameters={"kid": self.kid, "use": "sig", "alg": "RS256"},
                                               private=True)
        self.users = {}
        user = User(settings["user"])
        self.users[user.id] = user
        self.default_user = user
        self.clients: dict[str, Client] = {}
        for spec in settings["clients"]:
            c = Client.from_json(spec)
            self.clients[c.client_id] = c
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens_by_access: dict[str, Token] = {}
        self.tokens_by_refresh: dict[str, Token] = {}
        self.tokens: list[Token] = []
        self.devices: dict[str, DeviceCredentialDict] = {}
        self.device_grants: dict[str, tuple] = {}
        self.issued: list[dict] = []
        self._seq = 0
        self.reset_switches()
        self.reset_records()

    # ---------------------------------------------------------------- switches and records
    def reset_switches(self):
        with self.lock:
            s = self.settings
            self.ttl = {"access": s["access_ttl"], "refresh": s["refresh_ttl"], "id_token": s["id_token_ttl"],
                        "code": s["code_ttl"], "device_interval": s["device_interval"],
                        "device_expires": s["device_expires"]}
            self.switches = {"deny_next": 0, "omit_refresh_token": 0, "omit_id_token": 0, "slow_down_next": 0,
                             "enforce_interval": False, "revoke_access_on_refresh": False,
                             "login_form": False, "deny_clients": [], "deny_exchange_audiences": []}
            self.fail: dict[str, dict] = {}
            # token_answer: grant_type -> {"count", "set", "drop"}: rewrite the next successful answers
            self.answers: dict[str, dict] = {}
            self.token_moved = False  # discovery names /v2/token; /token answers an HTML 404
            self.discovery_override = None  # discovery_answer: this JSON object instead of the document
            self.down = None
            self.delays: dict[str, float] = {}

    def reset_records(self):
        with self.lock:
            self.counters = {"endpoints": Counter(), "grant_types": Counter(),
                             "token_results": defaultdict(Counter), "max_concurrent": Counter(),
                             "api": Counter(), "down_rejections": Counter()}
            self.inflight = Counter()
            self.token_calls: list[dict] = []
            self.api_calls: list[dict] = []
            self.revocations: list[dict] = []
            self.revoked: list[dict] = []
            self.device_polls: list[dict] = []
            self.login_forms: list[dict] = []  # every login form shown: {"client_id","prompt","at"}
            self.sessions: set[str] = set()  # browser sessions (the idp_session cookie) of submitted forms
            self.assertions: list[dict] = []  # private_key_jwt assertions received: {"header","claims","at"}

    def reset_tokens(self):
        with self.lock:
            self.codes.clear()
            self.tokens_by_access.clear()
            self.tokens_by_refresh.clear()
            self.tokens.clear()
            self.devices.clear()
            self.device_grants.clear()
            self.issued.clear()

    def take_switch(self, name) -> bool:
        """A counted switch: N > 0 fires N times, -1 fires always, 0 never."""
        with self.lock:
            v = self.switches[name]
            if v == -1:
                return True
            if v > 0:
                self.switches[name] = v - 1
                return True
            return False

    def set_switch(self, name, value):
        if name not in self.switches:
            raise ValueError(f"unknown switch {name!r}; known: {sorted(self.switches)}")
        if name in ("enforce_interval", "revoke_access_on_refresh", "login_form"):
            self.switches[name] = bool(value)
        elif name in ("deny_clients", "deny_exchange_audiences"):
            self.switches[name] = [str(v) for v in (value or [])]
        elif value is True:
            self.switches[name] = -1
        elif value is False or value is None:
            self.switches[name] = 0
        else:
            self.switches[name] = int(value)

    def _append(self, lst, item):
        lst.append(item)
        if len(lst) > MAX_EVENTS:
            del lst[: len(lst) - MAX_EVENTS]

    def record_issued(self, kind, value, grant_type, client_id, seq=None):
        with self.lock:
            self.issued.append({"kind": kind, "value": value, "grant_type": grant_type,
                                "client_id": client_id, "seq": seq, "at": _now()})

    def revoke_record(self, tok: Token, which: str, reason: str):
        with self.lock:
            if which == "refresh_token":
                if not tok.refresh_token:
                    return
                tok.refresh_revoked = True
                value = tok.refresh_token
            else:
                tok.access_revoked = True
                value = tok.access_token
            self._append(self.revoked, {"token": value, "type": which, "reason": reason, "seq": tok.seq,
                                        "client_id": tok.client_id, "at": _now()})

    # ---------------------------------------------------------------- codes
    def save_code(self, code, req):
        with self.lock:
            data = req.payload.data
            self.codes[code] = AuthorizationCode(
                code=code, client_id=req.client.client_id, redirect_uri=req.payload.redirect_uri,
                scope=req.scope, user_id=req.user.id, nonce=data.get("nonce"), auth_time=int(_now()),
                code_challenge=data.get("code_challenge"), code_challenge_method=data.get("code_challenge_method"),
                expires_at=_now() + self.ttl["code"])
            self.issued.append({"kind": "authorization_code", "value": code, "grant_type": "authorization_code",
                                "client_id": req.client.client_id, "seq": None, "at": _now()})

    def find_code(self, code, client):
        with self.lock:
            ac = self.codes.get(code)
            if ac is None or ac.client_id != client.client_id or ac.is_expired():
                return None
            return ac

    def nonce_in_use(self, nonce, client_id):
        with self.lock:
            return any(ac.nonce == nonce and ac.client_id == client_id and not ac.is_expired()
                       for ac in self.codes.values())

    # ---------------------------------------------------------------- tokens
    def expires_in(self, client, grant_type):
        return int(self.ttl["access"]) if self.ttl["access"] else 0

    def save_token(self, token: dict, req):
        with self.lock:
            self._seq += 1
            grant_type = req.payload.grant_type
            user = req.user
            tok = Token(self, self._seq, req.client.client_id, user.id if user else None, token.get("scope"),
                        grant_type, token["access_token"], token.get("refresh_token"), token.get("expires_in"),
                        self.ttl["refresh"])
            self.tokens.append(tok)
            self.tokens_by_access[tok.access_token] = tok
            self.record_issued("access_token", tok.access_token, grant_type, tok.client_id, tok.seq)
            if tok.refresh_token:
                self.tokens_by_refresh[tok.refresh_token] = tok
                self.record_issued("refresh_token", tok.refresh_token, grant_type, tok.client_id, tok.seq)
            g.idp_token_seq = tok.seq

    def find_token(self, value, hint=None):
        with self.lock:
            if hint == "refresh_token":
                return self.tokens_by_refresh.get(value) or self.tokens_by_access.get(value)
            return self.tokens_by_access.get(value) or self.tokens_by_refresh.get(value)

    # ---------------------------------------------------------------- device flow
    def save_device(self, client_id, scope, data):
        with self.lock:
            cred = DeviceCredentialDict(client_id=client_id, scope=scope, expires_at=_now() + data["expires_in"],
                                        created_at=_now(), last_poll=None, **data)
            self.devices[data["device_code"]] = cred
            self.issued.append({"kind": "device_code", "value": data["device_code"],
                                "grant_type": DEVICE_CODE_GRANT_TYPE, "client_id": client_id, "seq": None,
                                "at": _now()})

    def record_poll(self, device_code, result):
        with self.lock:
            cred = self.devices.get(device_code)
            now = _now()
            self._append(self.device_polls, {
                "user_code": cred["user_code"] if cred else None, "result": result, "at": now,
                "since_last": (now - cred["last_poll"]) if cred and cred.get("last_poll") else None,
                "interval": cred["interval"] if cred else None})
            if cred is not None:
                cred["last_poll"] = now

    def approve_device(self, user_code=None, approve=True):
        with self.lock:
            pending = [c for c in self.devices.values() if not c.get("consumed")
                       and c["user_code"] not in self.device_grants and not c.is_expired()]
            if user_code is None:
                if not pending:
                    raise LookupError("no pending device authorization")
                user_code = pending[-1]["user_code"]
            if not any(c["user_code"] == user_code for c in self.devices.values()):
                raise LookupError(f"unknown user_code {user_code!r}")
            self.device_grants[user_code] = (self.default_user, bool(approve))
            return user_code

    def device_list(self):
        with self.lock:
            out = []
            for c in self.devices.values():
                granted = self.device_grants.get(c["user_code"])
                status = ("consumed" if c.get("consumed") else "expired" if c.is_expired()
                          else "pending" if granted is None else "approved" if granted[1] else "denied")
                out.append({"user_code": c["user_code"], "client_id": c["client_id"], "scope": c.get("scope"),
                            "interval": c["interval"], "status": status, "created_at": c["created_at"],
                            "expires_at": c["expires_at"]})
            return out

    # ---------------------------------------------------------------- snapshot
    def counters_json(self):
        with self.lock:
            c = self.counters
            return {"endpoints": dict(c["endpoints"]), "grant_types": dict(c["grant_types"]),
                    "token_results": {k: dict(v) for k, v in c["token_results"].items()},
                    "max_concurrent": dict(c["max_concurrent"]), "api": dict(c["api"]),
                    "down_rejections": dict(c["down_rejections"])}

    def state_json(self):
        with self.lock:
            return {"issuer": self.issuer, "ttl": dict(self.ttl), "switches": dict(self.switches),
                    "fail": {k: dict(v) for k, v in self.fail.items()}, "down": self.down,
                    "delays": dict(self.delays), "counters": self.counters_json(),
                    "clients": [c.to_json() for c in self.clients.values()],
                    "user": self.default_user.claims}


# --------------------------------------------------------------------------- the app


ENDPOINT_NAMES = {  # Flask endpoint -> counter name
    "discovery": "discovery", "oauth_metadata": "discovery", "jwks": "jwks", "authorize": "authorize",
    "token": "token", "revocation": "revocation", "userinfo": "userinfo",
    "device_authorization": "device_authorization", "device_verify": "device_verify", "api": "api",
    "token_v2": "token",
}

HTML_404 = ("<!doctype html><html><head><title>404 Not Found</title></head>"
            "<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>")


def discovery_document(idp: IdP) -> dict:
    iss = idp.issuer
    scopes = sorted({s for c in idp.clients.values() for s in scope_to_list(c.scope)})
    return {
        "issuer": iss,
        "authorization_endpoint": iss + "/authorize",
        "token_endpoint": iss + ("/v2/token" if idp.token_moved else "/token"),
        "revocation_endpoint": iss + "/revoke",
        "userinfo_endpoint": iss + "/userinfo",
        "device_authorization_endpoint": iss + "/device_authorization",
        "jwks_uri": iss + "/jwks",
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials",
                                  DEVICE_CODE_GRANT_TYPE, TOKEN_EXCHANGE],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ALL_AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "revocation_endpoint_auth_methods_supported": ALL_AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "at_hash",
                             "name", "email", "pennkey", "preferred_username"],
    }


def _login_form(next_query: str) -> str:
    from html import escape
    return ("<!doctype html><title>Sign in</title><form method=post action=/login>"
            f"<input type=hidden name=next value=\"{escape(next_query)}\">"
            "<input name=username><input name=password type=password><button>Sign in</button></form>")


def _redirect_with_error(args, error: str, description: str) -> Response:
    """Back to the client's redirect_uri with an OAuth error (the uri is one the client registered)."""
    from urllib.parse import urlencode
    uri = args.get("redirect_uri", "")
    params = {"error": error, "error_description": description}
    if args.get("state"):
        params["state"] = args["state"]
    return Response("", 302, {"Location": uri + ("&" if "?" in uri else "?") + urlencode(params)})


def _json_error(status, error, description, headers=None):
    resp = jsonify({"error": error, "error_description": description})
    resp.status_code = status
    for k, v in (headers or []):
        resp.headers[k] = v
    return resp


def create_app(idp: IdP, runtime: "Runtime | None" = None) -> Flask:
    app = Flask("idp")
    server = Server()
    server.idp = idp
    server.init_app(app)
    # Authlib's bearer token generator, with the lifetimes the tests set at run time
    server.register_token_generator("default", BearerTokenGenerator(
        lambda **kw: generate_token(42), lambda **kw: generate_token(48), idp.expires_in))
    server.register_grant(AuthorizationCodeGrant, [S256CodeChallenge(required=True), OIDCCode(idp)])
    server.register_grant(RefreshTokenGrant, [OIDCToken(idp)])
    server.register_grant(ClientCredentialsGrant)
    server.register_grant(DeviceGrant, [OIDCToken(idp)])
    register_identity(server, idp)
    server.register_endpoint(Revocation)
    server.register_endpoint(DeviceAuthorization)
    protector = ResourceProtector()
    protector.register_token_validator(AccessTokenValidator(idp))
    server.register_endpoint(OIDCUserInfo(resource_protector=protector))
    app.idp = idp
    app.oauth_server = server

    # ------------------------------------------------------------ counting, down mode, delays
    @app.before_request
    def _before():
        if request.path.startswith("/_test/"):
            return None
        name = ENDPOINT_NAMES.get(request.endpoint or "", "unknown")
        with idp.lock:
            idp.counters["endpoints"][name] += 1
            down = idp.down
            delay = idp.delays.get(name, 0)
        if name == "token" and idp.token_moved and request.path == "/token":
            with idp.lock:
                idp._append(idp.token_calls, {"grant_type": request.form.get("grant_type") or "", "status": 404,
                                              "error": "moved", "client_id": None, "seq": None, "at": _now()})
            return Response(HTML_404, 404, {"Content-Type": "text/html; charset=utf-8"})
        if down and (not down.get("endpoints") or name in down["endpoints"]) and (
                not down.get("paths") or any(request.path.startswith(p) for p in down["paths"])):
            with idp.lock:
                idp.counters["down_rejections"][name] += 1
            if down.get("html"):  # what a router or load balancer in front of the IdP answers
                return Response(HTML_404 if down.get("status") == 404 else "<html><body>error</body></html>",
                                down.get("status", 503), {"Content-Type": "text/html; charset=utf-8"})
            resp = _json_error(down.get("status", 503), "temporarily_unavailable",
                               "the test switch 'down' is on")
            if down.get("retry_after") is not None:
                resp.headers["Retry-After"] = str(down["retry_after"])
            return resp
        if delay and name != "token":  # the token view sleeps itself, counted as in flight
            time.sleep(delay)
        return None

    # ------------------------------------------------------------ OAuth / OIDC endpoints
    @app.get("/.well-known/openid-configuration")
    def discovery():
        if idp.discovery_override is not None:
            return jsonify(idp.discovery_override)
        return jsonify(discovery_document(idp))

    @app.get("/.well-known/oauth-authorization-server")
    def oauth_metadata():
        return jsonify(discovery_document(idp))

    @app.get("/jwks")
    def jwks():
        return jsonify({"keys": [idp.signing_key.as_dict(private=False)]})

    @app.get("/authorize")
    def authorize():
        with idp.lock:
            user = idp.default_user
            try:
                grant = server.get_consent_grant(end_user=user)
            except OAuth2Error as error:
                return server.handle_error_response(None, error)
            client_id = request.args.get("client_id")
            if idp.switches["login_form"] and request.cookies.get("idp_session") not in idp.sessions:
                # No browser session: prompt=none cannot be answered without the user (OIDC Core 3.1.2.6).
                if request.args.get("prompt") == "none":
                    return _redirect_with_error(request.args, "login_required", "no session at the IdP")
                idp._append(idp.login_forms, {"client_id": client_id, "prompt": request.args.get("prompt"),
                                              "at": _now()})
                return Response(_login_form(request.query_string.decode()), 200,
                                {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"})
            deny = idp.take_switch("deny_next") or client_id in idp.switches["deny_clients"]
            return server.create_authorization_response(grant_user=None if deny else user, grant=grant)

    @app.post("/login")
    def login_submit():
        """The login form's submit: starts a browser session and goes back to /authorize."""
        session = generate_token(24)
        with idp.lock:
            idp.sessions.add(session)
        resp = Response("", 302, {"Location": "/authorize?" + request.form.get("next", ""), "Cache-Control": "no-store"})
        resp.set_cookie("idp_session", session, httponly=True, samesite="Lax")
        return resp

    @app.post("/v2/token")
    def token_v2():
        """The token endpoint after ``move_token``: the same view under the path discovery names."""
        if not idp.token_moved:
            return Response(HTML_404, 404, {"Content-Type": "text/html; charset=utf-8"})
        return token()

    @app.post("/token")
    def token():
        gt = request.form.get("grant_type") or ""
        with idp.lock:
            idp.counters["grant_types"][gt] += 1
            idp.inflight[gt] += 1
            idp.counters["max_concurrent"][gt] = max(idp.counters["max_concurrent"][gt], idp.inflight[gt])
            delay = idp.delays.get("token", 0)
        try:
            if delay:
                time.sleep(delay)
            with idp.lock:
                forced = idp.fail.get(gt)
                if forced and forced["count"] != 0:
                    if forced["count"] > 0:
                        forced["count"] -= 1
                    resp = _forced_failure(idp, server, gt, forced)
                else:
                    resp = server.create_token_response()
                    answer = idp.answers.get(gt)
                    if answer and answer["count"] != 0 and resp.status_code == 200:
                        resp = _rewritten_answer(resp, answer)
                error = None
                if resp.status_code >= 400:
                    try:
                        error = json.loads(resp.get_data()).get("error")
                    except ValueError:
                        error = "unparsable"
                idp.counters["token_results"][gt][error or "ok"] += 1
                idp._append(idp.token_calls, {"grant_type": gt, "status": resp.status_code, "error": error,
                                              "auth_method": auth_method_of(request),
                                              "resource": request.form.getlist("resource"),
                                              "audience": request.form.get("audience"),
                                              "client_id": request.form.get("client_id")
                                              or (request.authorization.username if request.authorization
                                                  else None),
                                              "seq": g.get("idp_token_seq"), "at": _now()})
            return resp
        finally:
            with idp.lock:
                idp.inflight[gt] -= 1

    @app.post("/revoke")
    def revocation():
        with idp.lock:
            resp = server.create_endpoint_response("revocation")
            idp._append(idp.revocations, {
                "token": request.form.get("token"), "token_type_hint": request.form.get("token_type_hint"),
                "client_id": request.form.get("client_id")
                or (request.authorization.username if request.authorization else None),
                "status": resp.status_code, "revoked": g.get("idp_revoked_type"), "at": _now()})
            return resp

    @app.post("/device_authorization")
    def device_authorization():
        with idp.lock:
            return server.create_endpoint_response("device_authorization")

    @app.get("/device")
    def device_verify():
        user_code = request.args.get("user_code")
        if not user_code:
            return Response("Device login: open /device?user_code=XXXX-XXXX (or approve via POST "
                            "/_test/device/approve).\n", mimetype="text/plain")
        try:
            idp.approve_device(user_code, approve=request.args.get("deny") is None)
        except LookupError as e:
            return _json_error(404, "not_found", str(e))
        return Response("Device approved.\n", mimetype="text/plain")

    @app.route("/userinfo", methods=["GET", "POST"])
    def userinfo():
        with idp.lock:
            return server.create_endpoint_response("userinfo")

    @app.route("/api", defaults={"rest": ""}, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    @app.route("/api/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    def api(rest):
        body = request.get_data()
        with idp.lock:
            idp.counters["api"]["calls"] += 1
            try:
                tok = protector.acquire_token()
            except OAuth2Error as error:
                idp.counters["api"]["unauthorized"] += 1
                idp._append(idp.api_calls, {"method": request.method, "path": request.path, "status": error.status_code,
                                            "seq": None, "at": _now()})
                resp = jsonify(dict(error.get_body()))
                resp.status_code = error.status_code
                for k, v in error.get_headers():
                    if k.lower() != "content-type":
                        resp.headers[k] = v
                return resp
            idp.counters["api"]["ok"] += 1
            idp._append(idp.api_calls, {"method": request.method, "path": request.path, "status": 200,
                                        "seq": tok.seq, "at": _now()})
            user = tok.get_user()
            answer = {"ok": True, "method": request.method, "path": request.path,
                      "query": request.query_string.decode("latin-1"),
                      "user": dict(user.userinfo()) if user else None, "client_id": tok.client_id,
                      "scope": tok.scope, "token_seq": tok.seq, "body_bytes": len(body),
                      "audience": tok.audience, "resource": tok.resource, "exchanged_from": tok.exchanged_from,
                      "body_sha256": hashlib.sha256(body).hexdigest()}
            if request.args.get("echo") == "1":
                # What a debug endpoint does: reflect the credential it was sent.
                answer["authorization"] = request.headers.get("Authorization", "")
            return jsonify(answer)

    control_routes(app, idp, runtime)
    from idp.am import register_am  # the AM journey simulator beside the IdP
    register_am(app, idp, server, User)
    return app


def _rewritten_answer(resp, answer: dict):
    """The ``token_answer`` switch: the answer Authlib made (the grant rotated, the new tokens
    saved) with members replaced or dropped, as a faulty IdP sends it."""
    if answer["count"] > 0:
        answer["count"] -= 1
    data = json.loads(resp.get_data())
    for key in answer.get("drop") or []:
        data.pop(key, None)
    for key, value in (answer.get("set") or {}).items():
        if isinstance(value, str) and "{" in value and key in data:
            value = value.replace("{}", str(data[key]))  # "{} x" keeps the issued value inside
        data[key] = value
    body = json.dumps(data, ensure_ascii=False).encode()
    out = Response(body, 200, {"Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"})
    return out


def _forced_failure(idp: IdP, server: Server, gt: str, forced: dict):
    """The ``fail`` switch: answer this token request with an OAuth error, rendered by Authlib."""
    revoke = forced.get("revoke")
    if revoke is None:
        revoke = forced["error"] == "invalid_grant" and gt == "refresh_token"
    if revoke and gt == "refresh_token":
        tok = idp.tokens_by_refresh.get(request.form.get("refresh_token") or "")
        if tok is not None and tok.refresh_live():
            idp.revoke_record(tok, "refresh_token", "fail_switch")
    error = OAuth2Error(description=forced.get("description") or "forced by the test switch 'fail'",
                        status_code=forced["status"], error=forced["error"])
    return server.handle_error_response(None, error)


# --------------------------------------------------------------------------- control API


def control_routes(app: Flask, idp: IdP, runtime: "Runtime | None"):
    """Test switches, all JSON, under ``/_test/`` (never counted, never 'down').

    GET  /_test/health                 {"status":"ok","online":bool}
    GET  /_test/state                  ttl, switches, fail, down, delays, counters, clients, user
    GET  /_test/counters               {"endpoints":{name:n}, "grant_types":{gt:n},
                                        "token_results":{gt:{"ok"|error:n}}, "max_concurrent":{gt:n},
                                        "api":{"calls","ok","unauthorized"}, "down_rejections":{name:n}}
    GET  /_test/token_calls            [{"grant_type","status","error","client_id","seq","at"}]
    GET  /_test/api_calls              [{"method","path","status","seq","at"}]
    GET  /_test/revocations            RFC 7009 requests: [{"token","token_type_hint","client_id","status","revoked","at"}]
    GET  /_test/revoked                every invalidation: [{"token","type","reason","seq","client_id","at"}]
                                       reason: revocation_endpoint | rotation | fail_switch | test_revoke | test_expire
    GET  /_test/issued[?kind=K]        [{"kind","value","grant_type","client_id","seq","at"}]
                                       kind: access_token | refresh_token | id_token | authorization_code | device_code
    GET  /_test/secrets                {"secrets":[...]} every issued value above plus the client secrets
    GET  /_test/tokens                 token records with liveness
    GET  /_test/device                 device authorizations [{"user_code","status",...}]
    GET  /_test/device_polls           [{"user_code","result","at","since_last","interval"}]
    POST /_test/device/approve         {"user_code"?: str (default: newest pending), "approve"?: true}
    POST /_test/switches               {"deny_next"|"omit_refresh_token"|"omit_id_token"|"slow_down_next": N|true|false,
                                        "enforce_interval": bool, "revoke_access_on_refresh": bool,
                                        "login_form": bool (GET /authorize without the idp_session cookie shows a
                                        login form, counted; with prompt=none it redirects error=login_required),
                                        "deny_clients": [client_id, ...] (always access_denied for them),
                                        "deny_exchange_audiences": [audience, ...] (token exchange: invalid_target)}
    GET  /_test/assertions             private_key_jwt assertions received: [{"header","claims","at"}]
    GET  /_test/login_forms            {"count": n, "forms": [{"client_id","prompt","at"}], "sessions": n}
    POST /_test/fail_token             {"grant_type":"refresh_token","count":1,"error":"invalid_grant",
                                        "status":400,"description"?:str,"revoke"?:bool}  (count -1 = always, 0 = off)
    POST /_test/token_answer           {"grant_type":"refresh_token","count":1,"set"?:{member: value},"drop"?:[members]}
                                       the next ``count`` successful answers (the grant already rotated) with members
                                       replaced ("{}" in a string value stands for the issued value) or dropped
                                       (count -1 = always, 0 = off)
    POST /_test/move_token             {"moved": bool}: discovery names /v2/token, and /token answers an HTML 404
    POST /_test/discovery_answer       {"document": object|null}: discovery answers 200 with this object (null: the real one)
    POST /_test/down                   {"down":true,"status":503,"endpoints"?:[names],"paths"?:[prefixes],"retry_after"?:s,
                                        "html"?:bool (an HTML page instead of the OAuth error body)} or {"down":false}
    POST /_test/offline                {"seconds"?: s}: close the main listening socket and its connections
                                       (connections refused); reopen on the same port after s seconds if given
    POST /_test/online                 reopen the main port now
    POST /_test/ttl                    {"access","refresh","id_token","code","device_interval","device_expires"}: seconds
                                       (applies to what is issued afterwards; access/refresh 0 = no expiry)
    POST /_test/delay                  {"<endpoint name>": seconds, ...} (0 removes)
    POST /_test/expire/<access_token>  expire that access token now (so /api/ answers 401)
    POST /_test/expire                 {"token": str} or {"all": true} (every access token)
    POST /_test/revoke                 {"token": str} revoke an access or refresh token out of band
    POST /_test/clients                a client spec (see Client.from_json): add or replace
    POST /_test/clients/<id>/redirect_uris {"redirect_uris":[...],"patterns":[...],"replace"?:false}
    POST /_test/reset                  {"tokens"?: false}: switches, ttl and records back to the start values;
                                       with tokens also codes, tokens, device codes and the issued list
    """

    def body():
        return request.get_json(silent=True) or {}

    def bad(msg):
        return _json_error(400, "bad_request", msg)

    @app.get("/_test/health")
    def t_health():
        return jsonify({"status": "ok", "online": runtime.online if runtime else True, "issuer": idp.issuer})

    @app.get("/_test/state")
    def t_state():
        st = idp.state_json()
        st["online"] = runtime.online if runtime else True
        return jsonify(st)

    @app.get("/_test/counters")
    def t_counters():
        return jsonify(idp.counters_json())

    @app.get("/_test/login_forms")
    def t_login_forms():
        with idp.lock:
            return jsonify({"count": len(idp.login_forms), "forms": list(idp.login_forms),
                            "sessions": len(idp.sessions)})

    @app.get("/_test/token_calls")
    def t_token_calls():
        with idp.lock:
            return jsonify(list(idp.token_calls))

    @app.get("/_test/api_calls")
    def t_api_calls():
        with idp.lock:
            return jsonify(list(idp.api_calls))

    @app.get("/_test/revocations")
    def t_revocations():
        with idp.lock:
            return jsonify(list(idp.revocations))

    @app.get("/_test/revoked")
    def t_revoked():
        with idp.lock:
            return jsonify(list(idp.revoked))

    @app.get("/_test/issued")
    def t_issued():
        kind = request.args.get("kind")
        with idp.lock:
            return jsonify([i for i in idp.issued if kind is None or i["kind"] == kind])

    @app.get("/_test/secrets")
    def t_secrets():
        with idp.lock:
            values = [i["value"] for i in idp.issued]
            values += [c.client_secret for c in idp.clients.values() if c.client_secret]
            return jsonify({"secrets": values})

    @app.get("/_test/assertions")
    def t_assertions():
        with idp.lock:
            return jsonify(list(idp.assertions))

    @app.get("/_test/tokens")
    def t_tokens():
        with idp.lock:
            return jsonify([t.to_json() for t in idp.tokens])

    @app.get("/_test/device")
    def t_device():
        return jsonify(idp.device_list())

    @app.get("/_test/device_polls")
    def t_device_polls():
        with idp.lock:
            return jsonify(list(idp.device_polls))

    @app.post("/_test/device/approve")
    def t_device_approve():
        b = body()
        try:
            code = idp.approve_device(b.get("user_code"), b.get("approve", True))
        except LookupError as e:
            return _json_error(404, "not_found", str(e))
        return jsonify({"user_code": code, "approved": bool(b.get("approve", True))})

    @app.post("/_test/switches")
    def t_switches():
        with idp.lock:
            try:
                for k, v in body().items():
                    idp.set_switch(k, v)
            except (ValueError, TypeError) as e:
                return bad(str(e))
            return jsonify(dict(idp.switches))

    @app.post("/_test/fail_token")
    def t_fail_token():
        b = body()
        gt = _grant_type(b.get("grant_type", "refresh_token"))
        spec = {"count": int(b.get("count", 1)), "error": b.get("error", "invalid_grant"),
                "status": int(b.get("status", 400)), "description": b.get("description"),
                "revoke": b.get("revoke")}
        with idp.lock:
            if spec["count"] == 0:
                idp.fail.pop(gt, None)
            else:
                idp.fail[gt] = spec
            return jsonify({k: dict(v) for k, v in idp.fail.items()})

    @app.post("/_test/token_answer")
    def t_token_answer():
        b = body()
        gt = _grant_type(b.get("grant_type", "refresh_token"))
        spec = {"count": int(b.get("count", 1)), "set": dict(b.get("set") or {}), "drop": list(b.get("drop") or [])}
        with idp.lock:
            if spec["count"] == 0:
                idp.answers.pop(gt, None)
            else:
                idp.answers[gt] = spec
            return jsonify({k: dict(v) for k, v in idp.answers.items()})

    @app.post("/_test/discovery_answer")
    def t_discovery_answer():
        with idp.lock:
            idp.discovery_override = body().get("document")
            return jsonify({"document": idp.discovery_override})

    @app.post("/_test/move_token")
    def t_move_token():
        with idp.lock:
            idp.token_moved = bool(body().get("moved", True))
            return jsonify({"moved": idp.token_moved})

    @app.post("/_test/down")
    def t_down():
        b = body()
        with idp.lock:
            if b.get("down", True):
                idp.down = {"status": int(b.get("status", 503)), "endpoints": b.get("endpoints"),
                            "paths": b.get("paths"), "retry_after": b.get("retry_after"), "html": bool(b.get("html"))}
            else:
                idp.down = None
            return jsonify({"down": idp.down})

    @app.post("/_test/offline")
    def t_offline():
        if runtime is None:
            return _json_error(501, "not_supported", "no runtime (app not started by idp.server)")
        seconds = body().get("seconds")
        runtime.go_offline(seconds=seconds, keep=request.environ.get("werkzeug.socket"))
        resp = jsonify({"online": runtime.online, "port": runtime.port, "reopen_after": seconds})
        resp.headers["Connection"] = "close"
        return resp

    @app.post("/_test/online")
    def t_online():
        if runtime is None:
            return _json_error(501, "not_supported", "no runtime (app not started by idp.server)")
        runtime.go_online()
        return jsonify({"online": runtime.online, "port": runtime.port})

    @app.post("/_test/ttl")
    def t_ttl():
        b = body()
        with idp.lock:
            unknown = set(b) - set(idp.ttl)
            if unknown:
                return bad(f"unknown ttl keys {sorted(unknown)}; known: {sorted(idp.ttl)}")
            for k, v in b.items():
                idp.ttl[k] = v
            return jsonify(dict(idp.ttl))

    @app.post("/_test/delay")
    def t_delay():
        with idp.lock:
            for k, v in body().items():
                if v:
                    idp.delays[k] = float(v)
                else:
                    idp.delays.pop(k, None)
            return jsonify(dict(idp.delays))

    def _expire(tok: Token):
        tok.access_expires_at = _now() - 1
        idp._append(idp.revoked, {"token": tok.access_token, "type": "access_token", "reason": "test_expire",
                                  "seq": tok.seq, "client_id": tok.client_id, "at": _now()})

    @app.post("/_test/expire/<path:value>")
    def t_expire_one(value):
        with idp.lock:
            tok = idp.tokens_by_access.get(value)
            if tok is None:
                return _json_error(404, "not_found", "no such access token")
            _expire(tok)
            return jsonify({"expired": 1})

    @app.post("/_test/expire")
    def t_expire():
        b = body()
        with idp.lock:
            if b.get("all"):
                live = [t for t in idp.tokens if t.access_live()]
                for t in live:
                    _expire(t)
                return jsonify({"expired": len(live)})
            tok = idp.tokens_by_access.get(b.get("token") or "")
            if tok is None:
                return _json_error(404, "not_found", "no such access token")
            _expire(tok)
            return jsonify({"expired": 1})

    @app.post("/_test/revoke")
    def t_revoke():
        value = body().get("token") or ""
        with idp.lock:
            tok = idp.find_token(value)
            if tok is None:
                return _json_error(404, "not_found", "no such token")
            which = "refresh_token" if value == tok.refresh_token else "access_token"
            idp.revoke_record(tok, which, "test_revoke")
            return jsonify({"revoked": which})

    @app.post("/_test/clients")
    def t_clients():
        try:
            c = Client.from_json(body())
        except (TypeError, ValueError, KeyError) as e:
            return bad(str(e))
        with idp.lock:
            idp.clients[c.client_id] = c
            return jsonify(c.to_json())

    @app.post("/_test/clients/<client_id>/redirect_uris")
    def t_redirects(client_id):
        b = body()
        with idp.lock:
            c = idp.clients.get(client_id)
            if c is None:
                return _json_error(404, "not_found", f"no client {client_id!r}")
            if b.get("replace"):
                c.redirect_uris, c.redirect_uri_patterns = [], []
            c.redirect_uris += list(b.get("redirect_uris", []))
            c.redirect_uri_patterns += list(b.get("patterns", []))
            return jsonify(c.to_json())

    @app.post("/_test/reset")
    def t_reset():
        b = body()
        idp.reset_switches()
        idp.reset_records()
        if b.get("tokens"):
            idp.reset_tokens()
        if runtime is not None and not runtime.online:
            runtime.go_online()
        return jsonify({"reset": True, "tokens": bool(b.get("tokens"))})


# --------------------------------------------------------------------------- listeners


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code="-", size="-"):
        if log.isEnabledFor(logging.DEBUG):
            # path only: query strings carry codes and states
            log.debug("%s %s %s", self.command, self.path.split("?", 1)[0], code)

    def log_error(self, format, *args):  # noqa: A002
        log.debug("http: " + format, *args)


class _TrackingServer(ThreadedWSGIServer):
    """Werkzeug's threaded server, remembering its open connections so it can drop them."""

    def __init__(self, host, port, app, fd, ssl_context=None):
        self._conns = set()
        self._conns_lock = threading.Lock()
        super().__init__(host, port, app, handler=_QuietHandler, fd=fd, ssl_context=ssl_context)

    def process_request(self, request, client_address):
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], OSError):
            return  # dropped on purpose (offline) or by the peer
        super().handle_error(request, client_address)

    def drop_connections(self, keep=None):
        with self._conns_lock:
            conns = [c for c in self._conns if c is not keep]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(512)
    except BaseException:
        s.close()
        raise
    return s


class Listener:
    def __init__(self, host, port, app, name, ssl_context=None):
        sock = _listen_socket(host, port)
        try:
            self.server = _TrackingServer(host, sock.getsockname()[1], app, fd=sock.fileno(), ssl_context=ssl_context)
        finally:
            sock.close()  # the server holds its own duplicate
        self.port = self.server.port
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name=f"idp-{name}", daemon=True)
        self.thread.start()

    def close(self, keep=None):
        self.server.shutdown()          # the accept loop ends, serve_forever closes the listening socket
        self.thread.join(timeout=5)
        self.server.drop_connections(keep=keep)


def _control_only(app):
    def wsgi(environ, start_response):
        if environ.get("PATH_INFO", "").startswith("/_test/"):
            return app(environ, start_response)
        body = b'{"error":"not_found","error_description":"the control port serves /_test/ only"}'
        start_response("404 Not Found", [("Content-Type", "application/json"),
                                         ("Content-Length", str(len(body)))])
        return [body]
    return wsgi


class Runtime:
    """The main listener (which can go offline and come back on the same port) and the control listener."""

    def __init__(self, idp: IdP, host: str, port: int, control_port: int | None, tls: dict | None = None):
        self.idp = idp
        self.host = host
        self._lock = threading.Lock()
        self._timer = None
        self.app = create_app(idp, self)
        self.main: Listener | None = Listener(host, port, self.app, "main")
        self.port = self.main.port
        shown = f"[{host}]" if ":" in host else host
        idp.issuer = f"http://{shown}:{self.port}"
        OpenIDProviderMetadata(discovery_document(idp)).validate()  # Authlib checks our discovery document
        self.control = (Listener(host, control_port, _control_only(self.app), "control")
                        if control_port is not None and control_port >= 0 else None)
        # The same app over TLS (RFC 8705 tls_client_auth): a client certificate is asked for and
        # checked against --tls-client-ca when one is shown, never required for the handshake.
        self.tls = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls["cert"], tls["key"])
            if tls.get("client_ca"):
                context.load_verify_locations(tls["client_ca"])
                context.verify_mode = ssl.CERT_OPTIONAL
            self.tls = Listener(host, tls.get("port", 0), self.app, "tls", ssl_context=context)
            idp.tls_issuer = f"https://{shown}:{self.tls.port}"

    @property
    def online(self) -> bool:
        return self.main is not None

    def go_offline(self, seconds=None, keep=None):
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            main, self.main = self.main, None
            if main is not None:
                main.close(keep=keep)
            if seconds:
                self._timer = threading.Timer(float(seconds), self.go_online)
                self._timer.daemon = True
                self._timer.start()

    def go_online(self):
        with self._lock:
            if self._timer is not None and self._timer is not threading.current_thread():
                self._timer.cancel()
            self._timer = None
            if self.main is not None:
                return
            deadline = time.monotonic() + 5
            while True:
                try:
                    self.main = Listener(self.host, self.port, self.app, "main")
                    return
                except OSError as e:
                    if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def close(self):
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            for lst in (self.main, self.control, self.tls):
                if lst is not None:
                    lst.close()
            self.main = None


# --------------------------------------------------------------------------- command line


def default_clients(args) -> list[dict]:
    patterns = args.redirect_uri_pattern if args.redirect_uri_pattern else [LOOPBACK_CALLBACK_PATTERN]
    return [
        {"client_id": args.public_client_id, "client_secret": None, "redirect_uris": args.redirect_uri,
         "redirect_uri_patterns": patterns, "scope": args.scope},
        {"client_id": args.confidential_client_id, "client_secret": args.confidential_client_secret,
         "redirect_uris": args.redirect_uri, "redirect_uri_patterns": patterns, "scope": args.scope},
    ]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m idp.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="main port (0: ephemeral)")
    p.add_argument("--control-port", type=int, default=0,
                   help="port serving /_test/ only, up while the main port is offline (0: ephemeral, -1: none)")
    p.add_argument("--access-ttl", type=int, default=300, help="access token lifetime, seconds (0: no expiry)")
    p.add_argument("--refresh-ttl", type=int, default=86400, help="refresh token lifetime, seconds (0: no expiry)")
    p.add_argument("--id-token-ttl", type=int, default=3600, help="id_token exp - iat, seconds")
    p.add_argument("--code-ttl", type=int, default=60, help="authorization code lifetime, seconds")
    p.add_argument("--device-interval", type=int, default=1, help="device flow polling interval, seconds")
    p.add_argument("--device-expires", type=int, default=600, help="device code lifetime, seconds")
    p.add_argument("--public-client-id", default="public-client")
    p.add_argument("--confidential-client-id", default="confidential-client")
    p.add_argument("--confidential-client-secret", default="confidential-secret")
    p.add_argument("--redirect-uri", action="append", default=[], help="an exact redirect URI (repeatable)")
    p.add_argument("--redirect-uri-pattern", action="append", default=[],
                   help=f"a redirect URI regex, full match (repeatable; default {LOOPBACK_CALLBACK_PATTERN})")
    p.add_argument("--scope", default=DEFAULT_SCOPE, help="scopes the clients may be granted")
    p.add_argument("--clients", help="JSON file: a list of client specs replacing the two default clients")
    p.add_argument("--user", help="JSON object of user claims (sub, pennkey, name, email ...)")
    p.add_argument("--verbose", action="store_true", help="log requests (method and path only) to stderr")
    p.add_argument("--tls-port", type=int, default=-1, help="also serve over TLS on this port (0: ephemeral, -1: no)")
    p.add_argument("--tls-cert", help="PEM server certificate (chain) for --tls-port")
    p.add_argument("--tls-key", help="PEM key of --tls-cert")
    p.add_argument("--tls-client-ca", help="PEM CA that client certificates on --tls-port are checked against")
    return p.parse_args(argv)


def settings_from_args(args) -> dict:
    if args.clients:
        with open(args.clients) as f:
            clients = json.load(f)
        if isinstance(clients, dict):
            clients = clients["clients"]
    else:
        clients = default_clients(args)
    user = dict(DEFAULT_USER)
    if args.user:
        user.update(json.loads(args.user))
    return {"access_ttl": args.access_ttl, "refresh_ttl": args.refresh_ttl, "id_token_ttl": args.id_token_ttl,
            "code_ttl": args.code_ttl, "device_interval": args.device_interval,
            "device_expires": args.device_expires, "clients": clients, "user": user}


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="idp %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("authlib").setLevel(logging.WARNING)
    idp = IdP(settings_from_args(args))
    tls = ({"port": args.tls_port, "cert": args.tls_cert, "key": args.tls_key, "client_ca": args.tls_client_ca}
           if args.tls_port >= 0 else None)
    runtime = Runtime(idp, args.host, args.port, args.control_port, tls)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(json.dumps({"event": "listening", "port": runtime.port,
                      "control_port": runtime.control.port if runtime.control else None,
                      "issuer": idp.issuer, "pid": os.getpid(),
                      "tls_port": runtime.tls.port if runtime.tls else None}), flush=True)
    while not stop.wait(3600):
        pass
    runtime.close()
    print(json.dumps({"event": "stopped"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
