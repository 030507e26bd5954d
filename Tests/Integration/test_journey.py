"""Journey login (``provider.grant: "journey"``) through the real binary against the AM
simulator beside the Authlib IdP: the HTTP endpoints end to end, every tree of the
simulator, error vs failure nodes, step-id rules, tenant cookie names, noSession,
forceAuth, restart, logout ending the AM session, and no secret in any log line."""

from __future__ import annotations

import json

import pytest

from credentials_support import EventStream, assert_no_secrets_logged, idp_factory, wait_until  # noqa: F401
from journey_support import (OTP, PASSWORD, am_config, am_state, answer, launch_journey, post, start, types,
                             walk)

LOGIN = {"IDToken1": "demo", "IDToken2": PASSWORD}


def test_login_journey_end_to_end_then_requests_carry_the_new_token(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    events = EventStream(p)
    try:
        r = start(p)
        assert r.status == 200, r
        node = r.json()
        assert node["node"] == "continue" and node["journey"] == "Login"
        assert types(node) == ["NameCallback", "PasswordCallback"]
        password = node["callbacks"][1]
        assert password["prompt"] == "Password" and password["secret"] is True
        assert password["inputs"] == [{"name": "IDToken2", "value": ""}]
        assert password["raw"]["type"] == "PasswordCallback"
        assert "authId" not in r.body.decode() and node["step"]

        r = answer(p, node["step"], LOGIN)
        assert r.status == 200, r
        done = r.json()
        assert done == {"node": "success", "journey": "Login", "user": "demo", "tokens": True}, done
        auth = p.auth()
        assert auth["state"] == "logged_in" and auth["subject"] == "demo", auth

        api = p.call("/api/journey")
        assert api.status == 200, api
        issued = [t["value"] for t in idp.control.issued("access_token")]
        assert api.json()["user"]["sub"] == "demo" and issued, api

        seen = am_state(idp)["requests"]
        assert all(req["api_version"] == "resource=2.1, protocol=1.0" for req in seen), seen
        assert seen[0]["query"] == {"authIndexType": "service", "authIndexValue": "Login"}, seen
        events.wait_for(lambda _: b"event: journey" in events.raw and b'"node":"success"' in events.raw, 5,
                        "journey progress on the event stream")
        events.wait_state("logged_in")
    finally:
        events.close()
    assert_no_secrets_logged(idp, [p], extra=[PASSWORD] + am_state(idp)["session_tokens"])


def test_otp_journey_and_no_password_otp_or_session_in_any_log_line(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    r = start(p, {"journey": "OTP"})
    node = r.json()
    r = answer(p, node["step"], LOGIN)
    node = r.json()
    assert node["node"] == "continue" and types(node) == ["TextOutputCallback", "PasswordCallback"], node
    assert node["callbacks"][0]["message"] == "A code was sent to your device."
    assert node["callbacks"][1]["prompt"] == "One Time Password"
    r = answer(p, node["step"], {"IDToken2": OTP})
    assert r.json()["node"] == "success", r
    sessions = am_state(idp)["session_tokens"]
    assert sessions
    assert_no_secrets_logged(idp, [p], extra=[PASSWORD, OTP] + sessions)
    for line in p.stderr().splitlines():
        assert PASSWORD not in line and OTP not in line


def test_wrong_password_gives_an_error_node_and_a_retry_succeeds(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    first = start(p).json()
    r = answer(p, first["step"], {"IDToken1": "demo", "IDToken2": "wrong-password"})
    assert r.status == 200, r
    error = r.json()
    assert error["node"] == "error" and error["message"] == "Login failure" and error["code"] == 401, error
    assert error["input"] == {"code": 401, "reason": "Unauthorized", "message": "Login failure"}
    assert types(error) == ["NameCallback", "PasswordCallback"] and error["step"] != first["step"]
    assert p.auth()["state"] == "logged_out"
    r = answer(p, error["step"], LOGIN)
    assert r.json()["node"] == "success", r
    assert "wrong-password" not in p.stderr()


@pytest.mark.parametrize("how", ["500", "offline"])
def test_am_answering_500_or_down_gives_a_failure_node(start_proxy, idp_factory, tmp_path, how):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    if how == "500":
        idp.control.down(status=500, paths=["/am/json"])
    else:
        idp.control.offline()
    try:
        r = start(p)
        assert r.status == 502, r
        node = r.json()
        assert node["node"] == "failure" and node["cause"], node
        assert "step" not in node
    finally:
        idp.control.up() if how == "500" else idp.control.online()
    assert start(p).json()["node"] == "continue"


def test_step_ids_are_single_use_bound_to_the_client_and_answers_are_checked(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    agent = {"User-Agent": "app-one/1.0"}
    node = start(p, None, agent).json()
    step = node["step"]

    other = answer(p, step, LOGIN, {"User-Agent": "intruder/1.0"})
    assert other.status == 404 and other.json()["error"] == "journey_step_unknown", other

    no_answers = post(p, f"/_platform/login/journey/{step}", {"IDToken1": "demo"}, agent)
    assert no_answers.status == 400 and "answers" in no_answers.json()["message"], no_answers
    not_json = post(p, f"/_platform/login/journey/{step}", b"{", agent)
    assert not_json.status == 400 and not_json.json()["error"] == "invalid_request"
    typo = answer(p, step, {"IDToken1": "demo", "password": PASSWORD}, agent)
    assert typo.status == 400 and '"password"' in typo.json()["message"], typo
    assert set(typo.json()) == {"error", "message", "requestID"}

    ok = answer(p, step, LOGIN, agent)
    assert ok.json()["node"] == "success", ok
    again = answer(p, step, LOGIN, agent)
    assert again.status == 404 and again.json()["error"] == "journey_step_unknown", again

    bad_name = start(p, {"journey": "../x"})
    assert bad_name.status == 400, bad_name
    # a tree the config does not list: the stored AM session must not drive it (a profile or
    # MFA-registration tree started by any local caller)
    unlisted = start(p, {"journey": "Admin"})
    assert unlisted.status == 400 and "allowedJourneys" in unlisted.json()["message"], unlisted
    wrong_method = p.call("/_platform/login/journey")
    assert wrong_method.status == 405


def test_choice_journey_offers_choices_text_hidden_and_metadata(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    node = walk(p, "Choice", [LOGIN])
    assert types(node) == ["TextOutputCallback", "ChoiceCallback", "HiddenValueCallback", "MetadataCallback"], node
    choice = node["callbacks"][1]
    assert choice["choices"] == ["Email", "SMS"] and choice["defaultChoice"] == 0
    assert node["callbacks"][3]["data"] == {"stage": "choice"}
    assert answer(p, node["step"], {"IDToken2": 1}).json()["node"] == "success"


def test_poll_journey_is_polled_by_the_proxy(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    events = EventStream(p)
    try:
        node = walk(p, "Poll", [LOGIN])
        assert node["node"] == "success", node
        polls = [r for r in am_state(idp)["requests"] if r["query"].get("authIndexValue") == "Poll"]
        assert len(polls) == 4, polls  # start, credentials, two polling waits sent back
        events.wait_for(lambda _: events.raw.count(b'"node":"polling"') >= 2, 5, "two polling events")
    finally:
        events.close()


def test_terms_journey_needs_acceptance(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    node = walk(p, "Terms", [LOGIN])
    assert types(node) == ["TermsAndConditionsCallback"] and node["callbacks"][0]["terms"], node
    refused = answer(p, node["step"], {"IDToken1": "false"}).json()
    assert refused["node"] == "error" and refused["message"] == "Terms not accepted", refused
    node = answer(p, refused["step"], LOGIN).json()
    assert answer(p, node["step"], {"IDToken1": True}).json()["node"] == "success"


def test_register_journey_reports_the_policy_failure_per_input_then_succeeds(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    node = start(p, {"journey": "Register"}).json()
    assert types(node) == ["ValidatedCreateUsernameCallback", "ValidatedCreatePasswordCallback",
                           "StringAttributeInputCallback", "BooleanAttributeInputCallback", "KbaCreateCallback"], node
    page = {"IDToken1": "newbie", "IDToken2": "short", "IDToken3": "newbie@example.test", "IDToken4": True,
            "IDToken5question": "Your first pet?", "IDToken5answer": "Rex"}
    again = answer(p, node["step"], page).json()
    assert again["node"] == "continue", again
    password = again["callbacks"][1]
    policy = {"policyRequirement": "LENGTH_BASED", "params": {"min-password-length": 8}}
    assert password["failedPolicies"] == [policy]
    assert password["inputs"][0] == {"name": "IDToken2", "value": "", "failedPolicies": [policy]}
    assert "failedPolicies" not in password["inputs"][1]
    done = answer(p, again["step"], {**page, "IDToken2": "long-enough-1"}).json()
    assert done["node"] == "success" and done["user"] == "newbie", done


def test_suspended_journey_resumes_from_its_link(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    node = walk(p, "Suspend", [LOGIN])
    assert node["node"] == "continue" and node["suspended"] is True, node
    assert types(node) == ["SuspendedTextOutputCallback"] and "email" in node["callbacks"][0]["message"]
    link = am_state(idp)["links"][-1]
    assert "suspendedId=" in link
    r = start(p, {"resume": link})
    assert r.json()["node"] == "success", r
    assert [q for q in am_state(idp)["requests"] if "suspendedId" in q["query"]]
    assert start(p, {"resume": "https://x.test/no-id"}).status == 400


def test_session_cookie_name_is_per_tenant(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    right = launch_journey(start_proxy, idp, tmp_path, name="right", realm="bravo", cookieName="6ac6499e9da2071")
    assert walk(right, None, [LOGIN])["node"] == "success"
    wrong = launch_journey(start_proxy, idp, tmp_path, name="wrong", realm="bravo")
    node = walk(wrong, None, [LOGIN])
    assert node["node"] == "failure", node
    assert node["cause"] == "AM redirected somewhere else than the redirect URI (no valid session?)", node
    assert wrong.auth()["state"] == "logged_out"


def test_no_session_verifies_without_tokens(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path, noSession=True)
    node = walk(p, None, [LOGIN])
    assert node == {"node": "success", "journey": "Login", "user": None, "tokens": False}, node
    assert am_state(idp)["sessions"] == []
    assert p.auth()["state"] == "logged_out"
    assert am_state(idp)["requests"][0]["query"].get("noSession") == "true"


def test_force_auth_runs_the_tree_over_a_live_session(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    assert walk(p, None, [LOGIN])["node"] == "success"
    # Without forceAuth the live AM session ends the tree at once (AM's own shortcut).
    assert start(p).json()["node"] == "success"
    assert p.server.stop() == 0
    q = launch_journey(start_proxy, idp, tmp_path, name="forced", port=p.port, state_dir=p.state_dir, forceAuth=True)
    node = start(q).json()
    assert node["node"] == "continue", node
    last = am_state(idp)["requests"][-1]
    assert last["query"].get("ForceAuth") == "true", last


def test_restart_keeps_the_login_and_logout_ends_the_am_session_and_revokes(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    assert walk(p, "OTP", [LOGIN, {"IDToken2": OTP}])["node"] == "success"
    assert len(am_state(idp)["sessions"]) == 1
    session_file = p.state_dir / "journey-session.json"
    wait_until(session_file.exists, 3, what="journey-session.json")
    assert oct(session_file.stat().st_mode & 0o777) == "0o600"
    assert p.server.stop() == 0

    q = launch_journey(start_proxy, idp, tmp_path, name="restarted", port=p.port, state_dir=p.state_dir)
    assert q.auth()["state"] == "logged_in"
    assert q.call("/api/after-restart").status == 200
    # The stored AM session goes with the next journey: AM ends the tree at once, no second session.
    assert start(q).json()["node"] == "success"
    assert am_state(idp)["requests"][-1]["cookie"] is True
    assert len(am_state(idp)["sessions"]) == 1

    r = post(q, "/_platform/logout")
    assert r.status == 200 and r.json()["revoked"] is True, r
    state = am_state(idp)
    assert state["sessions"] == [] and state["logouts"] == [{"known": True, "at": state["logouts"][0]["at"]}], state
    assert len(idp.control.revocations()) >= 1
    assert not session_file.exists()
    assert q.auth()["state"] == "logged_out"
    assert_no_secrets_logged(idp, [p, q], extra=[PASSWORD, OTP] + state["session_tokens"])


def test_journey_tokens_refresh_at_ams_token_endpoint_like_any_login(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=3)
    p = launch_journey(start_proxy, idp, tmp_path)
    assert walk(p, None, [LOGIN])["node"] == "success"
    wait_until(lambda: idp.control.token_calls("refresh_token") >= 1, 10, what="a proactive refresh")
    assert p.wait_state("logged_in", timeout=5)
    assert p.call("/api/after-refresh").status == 200
    assert idp.control.token_calls("authorization_code") == 1


def test_profile_journey_text_number_consent_and_confirmation(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    node = walk(p, "Profile", [LOGIN])
    assert types(node) == ["TextInputCallback", "NumberAttributeInputCallback", "ConsentMappingCallback",
                           "ConfirmationCallback"], node
    consent, confirm = node["callbacks"][2], node["callbacks"][3]
    assert consent["displayName"] == "CRM" and consent["isRequired"] is True
    assert confirm["options"] == ["Save", "Cancel"] and confirm["defaultOption"] == 0
    done = answer(p, node["step"], {"IDToken1": "Dee", "IDToken2": 42, "IDToken3": "true", "IDToken4": 0}).json()
    assert done["node"] == "success", done


def test_logout_ends_journeys_in_progress_so_an_old_step_cannot_sign_back_in(start_proxy, idp_factory, tmp_path):
    """Was: a journey left at its OTP step (an abandoned tab) signed the user back in after logout."""
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    pending = answer(p, start(p, {"journey": "OTP"}).json()["step"], LOGIN).json()["step"]
    done = answer(p, start(p).json()["step"], LOGIN).json()
    assert done["node"] == "success", done
    assert post(p, "/_platform/logout").status == 200
    late = answer(p, pending, {"IDToken2": OTP})
    assert late.status == 404 and late.json()["error"] == "journey_step_unknown", late
    assert p.auth()["state"] == "logged_out"
    assert not any(f.name in ("tokens.json", "journey-session.json") for f in p.state_dir.iterdir())
