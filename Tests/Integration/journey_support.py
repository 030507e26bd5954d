"""Plumbing for the journey-login tests: the proxy configured with ``provider.grant:
"journey"`` against the AM simulator (``idp.am``) of the test IdP, the HTTP calls of
``/_platform/login/journey``, and the AM simulator's ``/_test/am/`` switches."""

from __future__ import annotations

import json

from credentials_support import SCOPES, CredProxy, free_port, launch

PASSWORD = "Passw0rd!"
OTP = "246810"


def journey_provider(idp, port: int, realm: str = "alpha", **journey) -> dict:
    return {"grant": "journey", "clientID": idp.public_client_id,
            "redirectURI": f"http://127.0.0.1:{port}/_platform/callback", "scopes": list(SCOPES),
            "refreshBeforeExpirySeconds": 2,
            "journey": {"serverURL": idp.issuer + "/am", "realm": realm, "timeoutSeconds": 5,
                        "allowedJourneys": ["OTP", "Choice", "Poll", "Suspend", "Terms", "Register", "Profile"], **journey}}


def launch_journey(start_proxy, idp, workdir, *, name="proxy", port=None, state_dir=None, **journey) -> CredProxy:
    port = port or free_port()
    return launch(start_proxy, idp, workdir, name=name, port=port, state_dir=state_dir,
                  provider=journey_provider(idp, port, **journey))


def post(proxy: CredProxy, path: str, body=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return proxy.call(path, "POST", body=data, headers={"Content-Type": "application/json", **(headers or {})})


def start(proxy: CredProxy, body=None, headers=None):
    return post(proxy, "/_platform/login/journey", body, headers)


def answer(proxy: CredProxy, step: str, answers: dict, headers=None):
    return post(proxy, f"/_platform/login/journey/{step}", {"answers": answers}, headers)


def types(node: dict) -> list[str]:
    return [c["type"] for c in node.get("callbacks", [])]


def am_state(idp) -> dict:
    return idp.control.get("/_test/am/state")


def am_config(idp, **values) -> dict:
    return idp.control.post("/_test/am/config", values)


def walk(proxy: CredProxy, journey: str | None, pages: list[dict], headers=None) -> dict:
    """Starts ``journey`` and answers each continue node with the next page of answers;
    returns the last node."""
    r = start(proxy, {"journey": journey} if journey else None, headers)
    assert r.status == 200, r
    node = r.json()
    for page in pages:
        assert node["node"] == "continue", node
        r = answer(proxy, node["step"], page, headers)
        node = r.json()
    return node
