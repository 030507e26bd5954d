"""A ForgeRock AM / PingOne Advanced Identity Cloud simulator beside the test IdP.

It speaks the REST the Journey SDKs use (ForgeRock/forgerock-javascript-sdk,
ForgeRock/ping-ios-sdk), under ``/am`` on the IdP's main port:

- ``POST /am/json/realms/root[/realms/<realm>]/authenticate?authIndexType=service&authIndexValue=<tree>``
  with ``Accept-API-Version: resource=2.1, protocol=1.0``: ``{}`` starts a tree, a step
  posted back with its inputs filled continues it; ``suspendedId`` resumes a suspended
  one; ``ForceAuth=true`` runs the tree over a live session; ``noSession=true`` ends
  without a session. Steps are ``{authId, callbacks, header, description, stage}``;
  success is ``{tokenId, successUrl, realm}`` plus the realm's session cookie;
  a refusal is 401 ``{code, reason, message}`` and ends the authId.
- ``POST /am/json/realms/root[/realms/<realm>]/sessions?_action=logout`` (cookie or
  the cookie-named header) ends a session.
- ``GET /am/oauth2/realms/root[/realms/<realm>]/authorize``: needs the session
  cookie, then Authlib's authorization endpoint issues the code (PKCE S256) for the
  session's user; without a session a 302 to the login UI.
- ``POST …/access_token``, ``…/token/revoke``, ``GET|POST …/userinfo``: the IdP's
  own Authlib token, revocation and userinfo endpoints.

Trees: ``Login`` (name + password), ``OTP`` (then a one-time code), ``Choice`` (then a
choice, with text output, hidden value and metadata callbacks), ``Poll`` (then two
polling waits), ``Suspend`` (then a suspended step; the resume link is under
``/_test/am/links``), ``Terms`` (then terms and conditions), ``Register`` (validated
username and password, attributes, a KBA question; a password under 8 characters fails
the length policy first), ``Profile`` (then text, number, consent and confirmation inputs).

Test switches under ``/_test/am/`` (JSON): ``GET state`` (live sessions, logouts,
requests seen, links), ``POST config`` (``users``, ``otp``, ``poll_wait_ms``,
``cookie_names``), ``POST reset``.
"""

from __future__ import annotations

import json
import secrets
import threading
import time

from flask import Flask, Response, jsonify, request

DEFAULT_COOKIE_NAMES = {"root": "iPlanetDirectoryPro", "alpha": "iPlanetDirectoryPro", "bravo": "6ac6499e9da2071"}
DEFAULT_USERS = {"demo": "Passw0rd!"}
DEFAULT_OTP = "246810"
LENGTH_POLICY = {"policyRequirement": "LENGTH_BASED", "params": {"min-password-length": 8}}


def _cb(type_, outputs, inputs=()):
    return {"type": type_, "output": [{"name": n, "value": v} for n, v in outputs],
            "input": [{"name": n, "value": v} for n, v in inputs]}


def _inputs(step: dict) -> dict:
    values = {}
    for callback in step.get("callbacks") or []:
        for item in callback.get("input") or []:
            values[item.get("name")] = item.get("value")
    return values


class AM:
    """Trees, authIds, sessions and records, under one lock."""

    def __init__(self, idp):
        self.idp = idp
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.users = dict(DEFAULT_USERS)
            self.otp = DEFAULT_OTP
            self.poll_wait_ms = 300
            self.cookie_names = dict(DEFAULT_COOKIE_NAMES)
            self.auth = {}        # authId -> {"tree", "page", "realm", "user", "polls"}
            self.sessions = {}    # tokenId -> {"user", "realm", "at"}
            self.suspended = {}   # suspendedId -> auth record
            self.links = []
            self.logouts = []
            self.requests = []

    def cookie_name(self, realm):
        return self.cookie_names.get(realm, "iPlanetDirectoryPro")

    # ------------------------------------------------------------ pages
    def page(self, record):
        """The step for the record's current page."""
        page = record["page"]
        if page == "credentials":
            callbacks = [_cb("NameCallback", [("prompt", "User Name")], [("IDToken1", "")]),
                         _cb("PasswordCallback", [("prompt", "Password")], [("IDToken2", "")])]
            header = "Sign In"
        elif page == "otp":
            callbacks = [_cb("TextOutputCallback", [("message", "A code was sent to your device."), ("messageType", "0")]),
                         _cb("PasswordCallback", [("prompt", "One Time Password")], [("IDToken2", "")])]
            header = "Verification"
        elif page == "choice":
            callbacks = [_cb("TextOutputCallback", [("message", "Pick a second factor."), ("messageType", "0")]),
                         _cb("ChoiceCallback", [("prompt", "Second factor"), ("choices", ["Email", "SMS"]), ("defaultChoice", 0)],
                             [("IDToken2", 0)]),
                         _cb("HiddenValueCallback", [("value", "device-1"), ("id", "deviceId")], [("IDToken3", "device-1")]),
                         _cb("MetadataCallback", [("data", {"stage": "choice"})])]
            header = "Second factor"
        elif page == "poll":
            callbacks = [_cb("PollingWaitCallback", [("waitTime", str(self.poll_wait_ms)),
                                                     ("message", "Waiting for approval on your phone…")])]
            header = None
        elif page == "suspend":
            callbacks = [_cb("SuspendedTextOutputCallback", [("message", "An email has been sent. Follow its link to continue."),
                                                              ("messageType", "0")])]
            header = "Check your email"
        elif page == "terms":
            callbacks = [_cb("TermsAndConditionsCallback", [("version", "1.0"), ("terms", "Be excellent to each other."),
                                                             ("createDate", "2026-01-01T00:00:00Z")], [("IDToken1", False)])]
            header = "Terms"
        elif page == "profile":
            callbacks = [
                _cb("TextInputCallback", [("prompt", "Nickname"), ("defaultText", "")], [("IDToken1", "")]),
                _cb("NumberAttributeInputCallback", [("name", "age"), ("prompt", "Age"), ("required", True), ("policies", {}),
                                                     ("failedPolicies", []), ("validateOnly", False), ("value", None)],
                    [("IDToken2", None), ("IDToken2validateOnly", False)]),
                _cb("ConsentMappingCallback", [("name", "crm"), ("displayName", "CRM"), ("icon", ""), ("accessLevel", "read"),
                                               ("isRequired", True), ("message", "Share your profile with the CRM?"),
                                               ("fields", [])], [("IDToken3", False)]),
                _cb("ConfirmationCallback", [("prompt", ""), ("messageType", 0), ("options", ["Save", "Cancel"]),
                                             ("optionType", -1), ("defaultOption", 0)], [("IDToken4", 0)]),
            ]
            header = "Profile"
        elif page == "register":
            failed = record.get("failed", [])
            callbacks = [
                _cb("ValidatedCreateUsernameCallback", [("policies", {}), ("failedPolicies", []), ("validateOnly", False),
                                                        ("prompt", "Username")], [("IDToken1", ""), ("IDToken1validateOnly", False)]),
                _cb("ValidatedCreatePasswordCallback", [("echoOn", False), ("policies", {}),
                                                        ("failedPolicies", [json.dumps(p) for p in failed]),
                                                        ("validateOnly", False), ("prompt", "Password")],
                    [("IDToken2", ""), ("IDToken2validateOnly", False)]),
                _cb("StringAttributeInputCallback", [("name", "mail"), ("prompt", "Email Address"), ("required", True),
                                                     ("policies", {}), ("failedPolicies", []), ("validateOnly", False),
                                                     ("value", "")], [("IDToken3", ""), ("IDToken3validateOnly", False)]),
                _cb("BooleanAttributeInputCallback", [("name", "preferences/marketing"), ("prompt", "Send me news"),
                                                      ("required", False), ("policies", {}), ("failedPolicies", []),
                                                      ("validateOnly", False), ("value", False)],
                    [("IDToken4", False), ("IDToken4validateOnly", False)]),
                _cb("KbaCreateCallback", [("prompt", "Security question"), ("predefinedQuestions", ["Your first pet?"]),
                                          ("allowUserDefinedQuestions", True)],
                    [("IDToken5question", ""), ("IDToken5answer", "")]),
            ]
            header = "Register"
        else:
            raise ValueError(page)
        step = {"authId": record["id"], "callbacks": callbacks, "stage": page}
        if header:
            step["header"] = header
            step["description"] = ""
        return step

    TREES = {"Login": ["credentials"], "OTP": ["credentials", "otp"], "Choice": ["credentials", "choice"],
             "Poll": ["credentials", "poll"], "Suspend": ["credentials", "suspend"], "Terms": ["credentials", "terms"],
             "Register": ["register"], "Profile": ["credentials", "profile"]}

    def check(self, record, values):
        """None to go on, ``"again"`` to show the page again, or a refusal message (401)."""
        page = record["page"]
        if page == "credentials":
            user = values.get("IDToken1")
            if not user or self.users.get(user) != values.get("IDToken2"):
                return "Login failure"
            record["user"] = user
        elif page == "otp":
            if values.get("IDToken2") != self.otp:
                return "Login failure"
        elif page == "choice":
            if values.get("IDToken2") not in (0, 1):
                return "Invalid choice"
        elif page == "poll":
            record["polls"] = record.get("polls", 0) + 1
            if record["polls"] < 2:
                return "again"
        elif page == "terms":
            if values.get("IDToken1") is not True:
                return "Terms not accepted"
        elif page == "profile":
            if not values.get("IDToken1") or not isinstance(values.get("IDToken2"), (int, float)):
                return "Nickname and age are required"
            if values.get("IDToken3") is not True or values.get("IDToken4") != 0:
                return "Consent and Save are required"
        elif page == "register":
            user, password = values.get("IDToken1"), values.get("IDToken2") or ""
            if not user:
                return "Username required"
            if len(password) < 8:
                record["failed"] = [LENGTH_POLICY]
                return "again"
            self.users[user] = password
            record["user"] = user
        return None


def register_am(app: Flask, idp, server, user_class):
    am = AM(idp)
    app.am = am
    views = app.view_functions

    def refuse(message, status=401, reason="Unauthorized"):
        return jsonify({"code": status, "reason": reason, "message": message}), status

    def session_from_request(realm):
        name = am.cookie_name(realm)
        token = request.cookies.get(name) or request.headers.get(name)
        session = am.sessions.get(token) if token else None
        return (token, session) if session and session["realm"] == realm else (None, None)

    def success(record_user, realm, existing=None):
        if request.args.get("noSession") == "true":
            return jsonify({"successUrl": "/am/console", "realm": "/" + realm})
        token = existing or secrets.token_urlsafe(24) + "*AAJTSQACMDE.*"
        am.sessions[token] = {"user": record_user, "realm": realm, "at": time.time()}
        idp.users.setdefault(record_user, user_class({"sub": record_user, "pennkey": record_user, "name": record_user.title(),
                                                   "email": f"{record_user}@example.test"}))
        resp = jsonify({"tokenId": token, "successUrl": "/am/console", "realm": "/" + realm})
        resp.set_cookie(am.cookie_name(realm), token, path="/", httponly=True)
        return resp

    def authenticate(realm):
        body = request.get_json(silent=True) or {}
        args = request.args
        with am.lock:
            am.requests.append({"path": request.path, "query": dict(args), "api_version": request.headers.get("Accept-API-Version"),
                                "cookie": bool(request.cookies.get(am.cookie_name(realm))), "at": time.time()})
            if args.get("suspendedId"):
                record = am.suspended.pop(args["suspendedId"], None)
                if record is None:
                    return refuse("Suspended authentication session not found or expired")
                return success(record["user"], realm)
            auth_id = body.get("authId")
            if not auth_id:
                tree = args.get("authIndexValue") if args.get("authIndexType") == "service" else None
                if tree not in AM.TREES:
                    return refuse(f"No configuration found for tree {tree!r}", 400, "Bad Request")
                token, live = session_from_request(realm)
                if live and args.get("ForceAuth") != "true":
                    # AM's shortcut: a valid session and no ForceAuth ends at once, with that session.
                    return success(live["user"], realm, existing=token)
                record = {"id": secrets.token_urlsafe(32), "tree": tree, "pages": list(AM.TREES[tree]), "realm": realm}
                record["page"] = record["pages"].pop(0)
                am.auth[record["id"]] = record
                return jsonify(am.page(record))
            record = am.auth.get(auth_id)
            if record is None or record["realm"] != realm:
                return refuse("Invalid or expired authId", 400, "Bad Request")
            verdict = am.check(record, _inputs(body))
            if verdict == "again":
                return jsonify(am.page(record))
            if verdict is not None:
                am.auth.pop(auth_id, None)  # AM ends the authentication session on a failure
                return refuse(verdict)
            if record["pages"]:
                record["page"] = record["pages"].pop(0)
                if record["page"] == "suspend":
                    # The email suspend node: the link is "mailed" and this authId ends here.
                    suspended_id = secrets.token_urlsafe(16)
                    am.suspended[suspended_id] = record
                    am.links.append(f"{request.host_url}am/XUI/?realm=/{realm}&suspendedId={suspended_id}")
                    am.auth.pop(auth_id, None)
                return jsonify(am.page(record))
            am.auth.pop(auth_id, None)
            return success(record["user"], realm)

    def sessions(realm):
        if request.args.get("_action") != "logout":
            return refuse("Unknown action", 400, "Bad Request")
        with am.lock:
            token, live = session_from_request(realm)
            am.logouts.append({"known": live is not None, "at": time.time()})
            if live is None:
                return refuse("Invalid session")
            am.sessions.pop(token, None)
        return jsonify({"result": "Successfully logged out"})

    def authorize(realm):
        with am.lock:
            _, live = session_from_request(realm)
        if live is None:
            return Response(status=302, headers={"Location": f"{request.host_url}am/XUI/?realm=/{realm}#/login"})
        user = idp.users[live["user"]]
        with idp.lock:
            from authlib.oauth2 import OAuth2Error
            try:
                grant = server.get_consent_grant(end_user=user)
            except OAuth2Error as error:
                return server.handle_error_response(None, error)
            return server.create_authorization_response(grant_user=user, grant=grant)

    realm_prefixes = [("/am/json/realms/root/realms/<realm>", "/am/oauth2/realms/root/realms/<realm>"),
                      ("/am/json/realms/root", "/am/oauth2/realms/root")]
    for json_prefix, oauth_prefix in realm_prefixes:
        fixed = {} if "<realm>" in json_prefix else {"realm": "root"}
        suffix = "_sub" if "<realm>" in json_prefix else "_root"
        app.add_url_rule(json_prefix + "/authenticate", "am_authenticate" + suffix, authenticate, methods=["POST"], defaults=fixed or None)
        app.add_url_rule(json_prefix + "/sessions", "am_sessions" + suffix, sessions, methods=["POST"], defaults=fixed or None)
        app.add_url_rule(oauth_prefix + "/authorize", "am_authorize" + suffix, authorize, methods=["GET"], defaults=fixed or None)
        app.add_url_rule(oauth_prefix + "/access_token", "am_token" + suffix,
                         lambda realm=None: views["token"](), methods=["POST"], defaults=fixed or None)
        app.add_url_rule(oauth_prefix + "/token/revoke", "am_revoke" + suffix,
                         lambda realm=None: views["revocation"](), methods=["POST"], defaults=fixed or None)
        app.add_url_rule(oauth_prefix + "/userinfo", "am_userinfo" + suffix,
                         lambda realm=None: views["userinfo"](), methods=["GET", "POST"], defaults=fixed or None)

    @app.get("/_test/am/state")
    def t_am_state():
        with am.lock:
            return jsonify({"sessions": [{"user": s["user"], "realm": s["realm"]} for s in am.sessions.values()],
                            "session_tokens": list(am.sessions), "logouts": list(am.logouts),
                            "requests": list(am.requests), "links": list(am.links), "pending": len(am.auth)})

    @app.post("/_test/am/config")
    def t_am_config():
        b = request.get_json(silent=True) or {}
        with am.lock:
            if "users" in b:
                am.users.update(b["users"])
            if "otp" in b:
                am.otp = b["otp"]
            if "poll_wait_ms" in b:
                am.poll_wait_ms = int(b["poll_wait_ms"])
            if "cookie_names" in b:
                am.cookie_names.update(b["cookie_names"])
        return jsonify({"ok": True})

    @app.post("/_test/am/reset")
    def t_am_reset():
        am.reset()
        return jsonify({"reset": True})
