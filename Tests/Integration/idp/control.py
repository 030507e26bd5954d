"""Start the test IdP (``idp.server``) as a subprocess and drive its ``/_test/`` switches.

Standard library only::

    from idp.control import IdPProcess

    with IdPProcess(access_ttl=2, log_path=tmp_path / "idp.log") as idp:
        idp.discovery_url            # http://127.0.0.1:PORT/.well-known/openid-configuration
        idp.public_client_id         # "public-client" (no secret, PKCE S256 required)
        ctl = idp.control            # an IdPControl on the control port (up while the main port is offline)
        ctl.fail_refresh(1)          # next refresh -> 400 invalid_grant
        ctl.token_calls("refresh_token")
        ctl.secrets()                # every token/code value issued so far (grep the logs for them)

``IdPControl`` methods return the decoded JSON of the answer and raise
``ControlError`` on a non-2xx status.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

INTEGRATION_DIR = Path(__file__).resolve().parent.parent
DEVICE_CODE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"


class ControlError(RuntimeError):
    def __init__(self, status, body):
        super().__init__(f"IdP control answered {status}: {body!r}")
        self.status = status
        self.body = body


def pkce_pair() -> tuple[str, str]:
    """A fresh (code_verifier, S256 code_challenge)."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(48)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class IdPControl:
    """Client for the JSON control API under ``/_test/`` of ``idp.server``."""

    def __init__(self, base_url: str, timeout: float = 10):
        parts = urlsplit(base_url)
        self.host = parts.hostname
        self.port = parts.port
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict | None = None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Connection": "close"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if not 200 <= resp.status < 300:
            raise ControlError(resp.status, decoded)
        return decoded

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body=None):
        return self.call("POST", path, body if body is not None else {})

    # ------------------------------------------------------------- read
    def health(self) -> dict:
        return self.get("/_test/health")

    def state(self) -> dict:
        """ttl, switches, fail, down, delays, counters, clients, user, online."""
        return self.get("/_test/state")

    def counters(self) -> dict:
        """{"endpoints":{name:n}, "grant_types":{gt:n}, "token_results":{gt:{"ok"|error:n}},
        "max_concurrent":{gt:n}, "api":{"calls","ok","unauthorized"}, "down_rejections":{name:n}}"""
        return self.get("/_test/counters")

    def endpoint_calls(self, name: str) -> int:
        """Calls of one endpoint: discovery, jwks, authorize, token, revocation, userinfo,
        device_authorization, device_verify, api, unknown."""
        return self.counters()["endpoints"].get(name, 0)

    def token_calls(self, grant_type: str | None = None) -> int:
        """Token endpoint calls, all or of one grant_type ("device_code" is accepted for the URN)."""
        gts = self.counters()["grant_types"]
        if grant_type is None:
            return sum(gts.values())
        return gts.get(_gt(grant_type), 0)

    def token_results(self, grant_type: str) -> dict:
        """{"ok": n, "<error>": n} for one grant_type."""
        return self.counters()["token_results"].get(_gt(grant_type), {})

    def max_concurrent(self, grant_type: str) -> int:
        """The most token requests of that grant_type in flight at once (single-flight checks)."""
        return self.counters()["max_concurrent"].get(_gt(grant_type), 0)

    def api_counters(self) -> dict:
        """{"calls": n, "ok": n, "unauthorized": n} of the protected resource /api/."""
        return self.counters()["api"]

    def token_call_log(self) -> list:
        return self.get("/_test/token_calls")

    def api_call_log(self) -> list:
        return self.get("/_test/api_calls")

    def revocations(self) -> list:
        """RFC 7009 requests seen: [{"token","token_type_hint","client_id","status","revoked","at"}]."""
        return self.get("/_test/revocations")

    def revoked(self, reason: str | None = None) -> list:
        """Every invalidation: [{"token","type","reason","seq","client_id","at"}]."""
        items = self.get("/_test/revoked")
        return [i for i in items if reason is None or i["reason"] == reason]

    def issued(self, kind: str | None = None) -> list:
        """[{"kind","value","grant_type","client_id","seq","at"}]; kind: access_token, refresh_token,
        id_token, authorization_code, device_code."""
        return self.get("/_test/issued" + (f"?kind={quote(kind)}" if kind else ""))

    def secrets(self) -> list[str]:
        """Every secret the IdP handed out (tokens, codes) plus the client secrets."""
        return self.get("/_test/secrets")["secrets"]

    def assertions(self) -> list:
        """private_key_jwt assertions received: [{"header", "claims", "at"}]."""
        return self.get("/_test/assertions")

    def tokens(self) -> list:
        return self.get("/_test/tokens")

    def devices(self) -> list:
        return self.get("/_test/device")

    def device_polls(self) -> list:
        return self.get("/_test/device_polls")

    # ------------------------------------------------------------- switches
    def reset(self, tokens: bool = False) -> dict:
        """Switches, TTLs and records back to the start values (and tokens too when asked);
        brings the main port back online."""
        return self.post("/_test/reset", {"tokens": tokens})

    def set_ttl(self, access=None, refresh=None, id_token=None, code=None, device_interval=None,
                device_expires=None) -> dict:
        body = {k: v for k, v in dict(access=access, refresh=refresh, id_token=id_token, code=code,
                                      device_interval=device_interval, device_expires=device_expires).items()
                if v is not None}
        return self.post("/_test/ttl", body)

    def switches(self, **values) -> dict:
        """deny_next / omit_refresh_token / omit_id_token / slow_down_next: N (next N), True (always),
        False (off); enforce_interval, revoke_access_on_refresh: bool."""
        return self.post("/_test/switches", values)

    def deny_next(self, count=1):
        return self.switches(deny_next=count)

    def require_login_form(self, on: bool = True) -> dict:
        """/authorize shows a (counted) login form unless the browser has the IdP's session cookie."""
        return self.switches(login_form=on)

    def deny_clients(self, *client_ids) -> dict:
        """/authorize answers access_denied to these clients, always."""
        return self.switches(deny_clients=list(client_ids))

    def login_forms(self) -> int:
        """How many login forms /authorize has shown."""
        return self.get("/_test/login_forms")["count"]

    def omit_refresh_token(self, count=1):
        return self.switches(omit_refresh_token=count)

    def omit_id_token(self, count=1):
        return self.switches(omit_id_token=count)

    def slow_down_next(self, count=1):
        return self.switches(slow_down_next=count)

    def fail_token(self, grant_type="refresh_token", count=1, error="invalid_grant", status=400,
                   description=None, revoke=None) -> dict:
        """The next ``count`` token requests of ``grant_type`` answer ``status`` with ``error``
        (count -1: always, 0: off). ``revoke`` (default: for invalid_grant on refresh) also revokes
        the presented refresh token."""
        body = {"grant_type": grant_type, "count": count, "error": error, "status": status}
        if description is not None:
            body["description"] = description
        if revoke is not None:
            body["revoke"] = revoke
        return self.post("/_test/fail_token", body)

    def fail_refresh(self, count=1, error="invalid_grant", status=400, revoke=None) -> dict:
        return self.fail_token("refresh_token", count, error, status, revoke=revoke)

    def token_answer(self, grant_type="refresh_token", count=1, set=None, drop=None) -> dict:  # noqa: A002
        """The next ``count`` successful token answers of ``grant_type`` (the grant rotated and the
        new tokens saved) with members replaced (``set``; "{}" in a string stands for the issued
        value) or dropped (``drop``); count -1: always, 0: off. E.g. set={"expires_in": 0},
        drop=["access_token"], set={"access_token": "{} x"}."""
        return self.post("/_test/token_answer", {"grant_type": grant_type, "count": count,
                                                  "set": set or {}, "drop": list(drop or [])})

    def discovery_answer(self, document: dict | None) -> dict:
        """Discovery answers 200 with ``document`` instead of the real one (None: the real one again)."""
        return self.post("/_test/discovery_answer", {"document": document})

    def move_token(self, moved: bool = True) -> dict:
        """Discovery names /v2/token (served there); the old /token answers an HTML 404."""
        return self.post("/_test/move_token", {"moved": moved})

    def down(self, status=503, endpoints=None, paths=None, retry_after=None, html=False) -> dict:
        """Every endpoint (or only the named ones / path prefixes) answers ``status``; /_test/ is exempt.
        ``html``: an HTML error page (a router's) instead of an OAuth error body."""
        body = {"down": True, "status": status, "html": html}
        if endpoints is not None:
            body["endpoints"] = list(endpoints)
        if paths is not None:
            body["paths"] = list(paths)
        if retry_after is not None:
            body["retry_after"] = retry_after
        return self.post("/_test/down", body)

    def up(self) -> dict:
        return self.post("/_test/down", {"down": False})

    def offline(self, seconds=None) -> dict:
        """Close the main port's listening socket and drop its connections (connection refused);
        reopen on the same port after ``seconds`` if given. Use the control port to call this."""
        body = {} if seconds is None else {"seconds": seconds}
        return self.post("/_test/offline", body)

    def online(self) -> dict:
        return self.post("/_test/online")

    def delay(self, **seconds_by_endpoint) -> dict:
        """e.g. delay(token=0.5): answer the token endpoint 0.5 s late (0 removes)."""
        return self.post("/_test/delay", seconds_by_endpoint)

    def expire(self, access_token: str) -> dict:
        return self.post("/_test/expire/" + quote(access_token, safe=""))

    def expire_all(self) -> dict:
        """Expire every live access token now (the /api/ resource then answers 401)."""
        return self.post("/_test/expire", {"all": True})

    def revoke(self, token: str) -> dict:
        """Revoke an access or refresh token out of band (no RFC 7009 request recorded)."""
        return self.post("/_test/revoke", {"token": token})

    def approve_device(self, user_code: str | None = None, approve: bool = True) -> dict:
        """Approve (or deny) a device authorization; without user_code, the newest pending one."""
        body = {"approve": approve}
        if user_code is not None:
            body["user_code"] = user_code
        return self.post("/_test/device/approve", body)

    def add_client(self, client_id, client_secret=None, **spec) -> dict:
        """Add or replace a client: redirect_uris, redirect_uri_patterns, grant_types, response_types,
        scope, token_endpoint_auth_methods (see idp.server.Client)."""
        return self.post("/_test/clients", {"client_id": client_id, "client_secret": client_secret, **spec})

    def set_redirect_uris(self, client_id, redirect_uris=(), patterns=(), replace=False) -> dict:
        return self.post(f"/_test/clients/{quote(client_id, safe='')}/redirect_uris",
                         {"redirect_uris": list(redirect_uris), "patterns": list(patterns), "replace": replace})

    def wait_for(self, predicate, timeout=10.0, interval=0.05):
        """Poll ``predicate(self)`` until it returns something truthy; return that or raise TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError("IdP condition not met in time")
            time.sleep(interval)


def _gt(grant_type: str) -> str:
    return DEVICE_CODE_GRANT_TYPE if grant_type in ("device_code", "device") else grant_type


class IdPProcess:
    """``python3 -m idp.server`` as a child process.

    Keyword options become flags (``access_ttl=2`` -> ``--access-ttl 2``; a list repeats the flag;
    True adds a bare flag). ``port`` pins the main port (e.g. to restart on the same issuer).
    stderr goes to ``log_path`` (a temporary file when not given).
    """

    def __init__(self, log_path: str | os.PathLike | None = None, python: str = sys.executable,
                 start_timeout: float = 10.0, **options):
        self.options = options
        self.python = python
        self.start_timeout = start_timeout
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None
        self.port = None
        self.control_port = None
        self.issuer = None

    def argv(self) -> list[str]:
        argv = [self.python, "-m", "idp.server"]
        opts = {"port": 0, **self.options}
        for key, value in opts.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is False or value is None:
                continue
            elif isinstance(value, (list, tuple)):
                for v in value:
                    argv += [flag, str(v)]
            else:
                argv += [flag, str(value)]
        return argv

    def start(self) -> "IdPProcess":
        if self.log_path is None:
            import tempfile
            fd, name = tempfile.mkstemp(prefix="idp-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._log = open(self.log_path, "ab")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(INTEGRATION_DIR) + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(self.argv(), cwd=INTEGRATION_DIR, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env)
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.start_timeout)
        if not line or not line[0]:
            self.stop()
            raise RuntimeError(f"idp.server did not start within {self.start_timeout}s; "
                               f"log {self.log_path}:\n{self.log_text()[-2000:]}")
        event = json.loads(line[0])
        assert event.get("event") == "listening", event
        self.port = event["port"]
        self.control_port = event.get("control_port")
        self.tls_port = event.get("tls_port")
        self.issuer = event["issuer"]
        return self

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def base_url(self) -> str:
        return self.issuer

    @property
    def discovery_url(self) -> str:
        return self.issuer + "/.well-known/openid-configuration"

    @property
    def control_url(self) -> str:
        host = urlsplit(self.issuer).hostname
        port = self.control_port if self.control_port else self.port
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @property
    def control(self) -> IdPControl:
        return IdPControl(self.control_url)

    @property
    def public_client_id(self) -> str:
        return self.options.get("public_client_id", "public-client")

    @property
    def confidential_client_id(self) -> str:
        return self.options.get("confidential_client_id", "confidential-client")

    @property
    def confidential_client_secret(self) -> str:
        return self.options.get("confidential_client_secret", "confidential-secret")

    def endpoint(self, path: str) -> str:
        return self.issuer + path

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM (the server exits 0), SIGKILL after ``timeout``. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        if getattr(self, "_log", None):
            self._log.close()
        return self.proc.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
