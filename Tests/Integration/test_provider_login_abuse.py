"""Phased login and provider selection under abuse, through the real binary: replayed and
mixed-up `state` values, callbacks carrying both `code` and `error`, odd `?provider=` values,
every `/_platform/` path under every method (status, `Allow`, JSON body, HEAD without body),
login pages drawn in another site's frames, and bursts of login starts against the one the
user is finishing."""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

from credentials_support import free_port, http_call, idp_factory, launch, wait_until  # noqa: F401
from proxy import exchange
from test_providers import Browser, add_ping_client, providers_state, start_two


def authorize_redirect(p, path="/_platform/login"):
    r = p.call(path)
    assert r.status == 302, r
    return r.header("location"), {k: v[0] for k, v in parse_qs(urlsplit(r.header("location")).query).items()}


def test_a_replayed_or_foreign_state_never_signs_a_provider_in(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    browser = Browser()
    # The chain's first step: platform, interactively; the IdP redirects back with a code.
    location, query = authorize_redirect(p)
    assert query["client_id"] == idp.public_client_id and "prompt" not in query
    back = browser._call(location)
    assert back.status in (302, 303), back
    callback = back.header("location")
    assert callback.startswith(p.base + "/_platform/callback")
    step = browser._call(callback)
    assert step.status == 302, step  # on to ping, silently
    assert parse_qs(urlsplit(step.header("location")).query)["prompt"] == ["none"]
    # The same callback again: the state was used once.
    replay = http_call(callback)
    assert replay.status == 400 and b"unknown or expired state" in replay.body, replay
    # platform's code with ping's state (a state of the chain, of another provider).
    ping_state = parse_qs(urlsplit(step.header("location")).query)["state"][0]
    code = parse_qs(urlsplit(callback).query)["code"][0]
    mixed = http_call(p.base + "/_platform/callback?" + urlencode({"code": code, "state": ping_state}))
    assert mixed.status in (200, 400), mixed
    wait_until(lambda: True, timeout=0.2)
    # Whatever that did, ping is not signed in with a token platform's client was issued.
    assert providers_state(p)["ping"] == "logged_out", p.auth()


def test_a_callback_with_both_code_and_error_is_a_refusal(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    browser = Browser()
    location, _ = authorize_redirect(p, "/_platform/login?provider=platform")
    callback = browser._call(location).header("location")
    query = dict(parse_qs(urlsplit(callback).query))
    both = {"code": query["code"][0], "state": query["state"][0], "error": "access_denied"}
    r = http_call(p.base + "/_platform/callback?" + urlencode(both))
    assert r.status == 400 and b"access_denied" in r.body, r
    assert providers_state(p)["platform"] == "logged_out"


def test_login_required_on_an_interactive_step_is_reported_not_retried(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    _, query = authorize_redirect(p)
    assert "prompt" not in query
    r = http_call(p.base + "/_platform/callback?" + urlencode({"state": query["state"], "error": "login_required"}))
    # platform was asked interactively: no second interactive try, the chain goes on to ping silently.
    assert r.status == 302, r
    follow = {k: v[0] for k, v in parse_qs(urlsplit(r.header("location")).query).items()}
    assert follow["client_id"] == "ping-client" and follow["prompt"] == "none", follow
    r = http_call(p.base + "/_platform/callback?" + urlencode({"state": follow["state"], "error": "access_denied"}))
    assert r.status == 400 and b"Not signed in: platform" in r.body and b"ping" in r.body, r


def test_odd_provider_values_are_refused_as_unknown(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    for value in ["", "x" * 3000, "../platform", "platform%00", "PLATFORM", "platform "]:
        r = p.call("/_platform/login?" + urlencode({"provider": value}))
        assert r.status == 404 and r.header("content-type") == "application/json", (value[:20], r)
        assert r.json()["error"] == "unknown_provider", r
    # Percent-encoded names decode to the provider.
    r = p.call("/_platform/login?provider=pl%61tform")
    assert r.status == 302 and "client_id=" + idp.public_client_id in r.header("location"), r
    # Repeated: the first one counts (as everywhere else in the query).
    r = p.call("/_platform/login?provider=ping&provider=platform")
    assert r.status == 302 and "client_id=ping-client" in r.header("location"), r


def raw(port, request: bytes) -> bytes:
    """Everything the proxy answers to ``request`` (each asks ``Connection: close``)."""
    return exchange(("127.0.0.1", port), request, timeout=5, stop_after_response=False).data


def test_every_platform_path_answers_every_method_with_a_json_error_or_its_handler(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    gets = ["/_platform/health", "/_platform/ready", "/_platform/metrics", "/_platform/auth", "/_platform/userinfo",
            "/_platform/login", "/_platform/callback"]
    posts = ["/_platform/login/device", "/_platform/login/demo", "/_platform/logout", "/_platform/mock",
             "/_platform/login/journey"]
    methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "FROB"]
    problems = []
    for path in gets + posts:
        allowed = {"GET", "HEAD"} if path in gets else {"POST"}
        for method in methods:
            if method in allowed:
                continue
            answer = raw(p.port, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{p.port}\r\nContent-Length: 0\r\n"
                                 f"Connection: close\r\n\r\n".encode())
            head, _, body = answer.partition(b"\r\n\r\n")
            status = int(head.split(b" ")[1])
            headers = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")[1:]}
            if status != 405:
                problems.append((method, path, status))
                continue
            allow = headers.get(b"allow", b"").decode()
            if allow != ("GET, HEAD" if path in gets else "POST") and allow != ("GET" if path in gets else "POST"):
                problems.append((method, path, "Allow", allow))
            if method != "HEAD" and json.loads(body)["error"] != "method_not_allowed":
                problems.append((method, path, "body", body[:80]))
    # Unknown paths below /_platform: 404 JSON for every method, HEAD without a body.
    for method in methods:
        answer = raw(p.port, f"{method} /_platform/nope HTTP/1.1\r\nHost: 127.0.0.1:{p.port}\r\nContent-Length: 0\r\n"
                             f"Connection: close\r\n\r\n".encode())
        head, _, body = answer.partition(b"\r\n\r\n")
        if int(head.split(b" ")[1]) != 404:
            problems.append((method, "/_platform/nope", head.split(b"\r\n")[0]))
        if method == "HEAD" and body:
            problems.append(("HEAD body", body[:60]))
    # TRACE is refused before anything, probes included.
    for path in ["/_platform/health", "/_platform/auth", "/api/x"]:
        answer = raw(p.port, f"TRACE {path} HTTP/1.1\r\nHost: 127.0.0.1:{p.port}\r\nConnection: close\r\n\r\n".encode())
        if b" 405 " not in answer.split(b"\r\n")[0]:
            problems.append(("TRACE", path, answer.split(b"\r\n")[0]))
        # Its Allow is the endpoint's own, as for any other method it does not take.
        allow = [l for l in answer.split(b"\r\n\r\n")[0].split(b"\r\n") if l.lower().startswith(b"allow:")]
        if path.startswith("/_platform/") and allow != [b"Allow: GET"]:
            problems.append(("TRACE Allow", path, allow))
    # HEAD on a GET endpoint: its headers, no body.
    for path in gets:
        answer = raw(p.port, f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1:{p.port}\r\nConnection: close\r\n\r\n".encode())
        head, _, body = answer.partition(b"\r\n\r\n")
        if body:
            problems.append(("HEAD body", path, body[:60]))
    assert not problems, problems


def test_probes_answer_before_the_guards_and_the_rest_after(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp, extra={"apiKey": "k"})
    assert http_call(p.base + "/_platform/health", headers={"Host": "10.1.2.3"}).status == 200
    assert http_call(p.base + "/_platform/auth").status == 401
    assert http_call(p.base + "/_platform/login", headers={"X-Proxy-Key": "k", "Origin": "https://evil.example"}).status == 403
    # A cross-site navigation to the login is allowed (an app page links to it) …
    r = http_call(p.base + "/_platform/login", headers={"X-Proxy-Key": "k", "Sec-Fetch-Site": "cross-site"})
    assert r.status == 302, r
    # … but not an <img> or a fetch from another site: each would start a login.
    for mode in ("no-cors", "cors"):
        r = http_call(p.base + "/_platform/login", headers={"X-Proxy-Key": "k", "Sec-Fetch-Site": "cross-site",
                                                            "Sec-Fetch-Mode": mode})
        assert r.status == 403 and r.json()["error"] == "cross_site_request", r
    r = http_call(p.base + "/_platform/login", headers={"X-Proxy-Key": "k", "Sec-Fetch-Site": "cross-site",
                                                        "Sec-Fetch-Mode": "navigate"})
    assert r.status == 302, r
    # … a cross-site logout is not.
    r = http_call(p.base + "/_platform/logout", method="POST", headers={"X-Proxy-Key": "k", "Sec-Fetch-Site": "cross-site"})
    assert r.status == 403, r


def test_logout_without_provider_ends_every_login_and_token_files_are_private(start_proxy, idp_factory, tmp_path):
    first, second = idp_factory(access_ttl=120), idp_factory(access_ttl=120)
    add_ping_client(second)
    p = start_two(start_proxy, tmp_path, first, second)
    assert Browser().open(p.base + "/_platform/login").status == 200
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")
    for name in ("tokens-platform.json", "tokens-ping.json"):
        assert (p.state_dir / name).stat().st_mode & 0o777 == 0o600, name
    r = p.call("/_platform/logout", method="POST")
    assert r.status == 200 and r.json()["providers"] == {"platform": {"revoked": True}, "ping": {"revoked": True}}, r
    assert providers_state(p) == {"platform": "logged_out", "ping": "logged_out"}
    wait_until(lambda: not any((p.state_dir / n).exists() for n in ("tokens-platform.json", "tokens-ping.json")),
               timeout=3, what="both token files removed")
    assert p.call("/api/x").status == 401 and p.call("/ping/x").status == 401
    # An unknown provider's logout ends nothing.
    assert p.call("/_platform/logout?provider=nope", method="POST").status == 404


def test_check_config_refuses_a_provider_name_that_is_empty_or_a_path(tmp_path):
    import subprocess
    from proxy import binary_path
    for name in ["", "../x", "/", ".", "a/b"]:
        config = tmp_path / "c.json"
        config.write_text(json.dumps({"stateDirectory": str(tmp_path / "s"),
                                      "providers": {name: {"grant": "static", "accessToken": "t"}}}))
        out = subprocess.run([str(binary_path()), "check-config", "--config", str(config)], capture_output=True,
                             text=True, timeout=10)
        assert out.returncode == 1, (name, out.stdout)
        assert "a provider name has 1 to 32" in out.stdout or "must not be empty" in out.stdout, (name, out.stdout)


def test_head_on_the_auth_event_stream_ends_after_its_head_and_the_connection_goes_on(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    s = socket.create_connection(("127.0.0.1", p.port), timeout=3)
    host = f"Host: 127.0.0.1:{p.port}\r\n"
    s.sendall(f"HEAD /_platform/auth/events HTTP/1.1\r\n{host}\r\nGET /_platform/health HTTP/1.1\r\n{host}\r\n".encode())
    out = b""
    try:
        while out.count(b"HTTP/1.1 ") < 2 or not out.endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    assert out.startswith(b"HTTP/1.1 200"), out
    assert b"event: state" not in out, out
    assert out.count(b"HTTP/1.1 200") == 2 and out.endswith(b'{"status":"ok"}'), out


def test_logout_with_only_static_providers_says_there_is_no_login_instead_of_logged_out(start_proxy, tmp_path):
    port = free_port()
    config = {"listen": [f"127.0.0.1:{port}"], "stateDirectory": str(tmp_path / "s"),
              "providers": {"a": {"grant": "static", "accessToken": "ta"}, "b": {"grant": "static", "accessToken": "tb"}},
              "routes": [{"name": "a", "path": "/a/", "upstream": "http://127.0.0.1:9/", "credential": "access_token",
                          "provider": "a"},
                         {"name": "b", "path": "/b/", "upstream": "http://127.0.0.1:9/", "credential": "access_token",
                          "provider": "b"}]}
    start_proxy(config)
    r = http_call(f"http://127.0.0.1:{port}/_platform/logout", method="POST")
    assert r.status == 404 and r.json()["error"] == "login_unavailable", r
    auth = http_call(f"http://127.0.0.1:{port}/_platform/auth").json()
    assert {n: f["state"] for n, f in auth["providers"].items()} == {"a": "logged_in", "b": "logged_in"}, auth


def test_a_route_carries_only_its_providers_token_across_a_reload_and_a_redirect(start_proxy, main_upstream,
                                                                                 other_upstream, tmp_path):
    import copy
    import signal
    config = {
        "listen": ["127.0.0.1:0"],
        "stateDirectory": str(tmp_path / "state"),
        "providers": {"a": {"grant": "static", "accessToken": "token-a"},
                      "b": {"grant": "static", "accessToken": "token-b"}},
        "routes": [{"name": "ra", "path": "/a/", "upstream": main_upstream.url("/a/"), "credential": "access_token",
                    "provider": "a", "headers": ["Authorization"]},
                   {"name": "rb", "path": "/b/", "upstream": other_upstream.url("/b/"), "credential": "access_token",
                    "provider": "b", "headers": ["Authorization"]}],
    }
    server = start_proxy(config)

    def sent(upstream, path):
        upstream.clear()
        assert server.get(path).status == 200
        return upstream.wait_for(lambda records: records and records[-1]).header("Authorization")

    assert sent(main_upstream, "/a/x") == "Bearer token-a"
    # a's upstream redirects to b's host: followed as GET, without a's token (b's host is not a's).
    to_b = other_upstream.url("/b/echo")
    other_upstream.clear()
    r = server.get("/a/redirect?" + urlencode({"to": to_b, "status": 302}))
    assert r.status == 200, r
    record = other_upstream.wait_for(lambda records: records and records[-1])
    assert record.header("Authorization") is None, record.header("Authorization")
    # A reload moves route ra to provider b: from then on it carries b's token, never a's.
    cfg = copy.deepcopy(server.config)
    cfg["routes"][0]["provider"] = "b"
    tmp = server.config_path.with_name(server.config_path.name + ".new")
    tmp.write_text(json.dumps(cfg))
    tmp.replace(server.config_path)
    server.signal(signal.SIGHUP)
    wait_until(lambda: server.log_events("config_reloaded"), timeout=5, what="reloaded")
    for _ in range(6):
        assert sent(main_upstream, "/a/x") == "Bearer token-b"


# --------------------------------------------------------------------------- frames and bursts of starts

def cross_site(dest: str, site: str = "cross-site") -> dict:
    return {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": dest}


def test_a_login_page_in_a_frame_of_another_site_is_refused_and_starts_no_login(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)
    for dest in ("iframe", "frame", "embed", "object", "fencedframe", "IFrame"):
        r = p.call("/_platform/login", headers=cross_site(dest))
        assert r.status == 403 and r.json()["error"] == "cross_site_request", (dest, r)
        r = p.call("/_platform/login", headers=cross_site(dest, site="same-site"))
        assert r.status == 403 and r.json()["error"] == "cross_site_request", (dest, r)
    # A frame of the proxy's own pages, and a top-level navigation from another site, still start one.
    assert p.call("/_platform/login", headers=cross_site("iframe", site="same-origin")).status == 302
    assert p.call("/_platform/login", headers=cross_site("document")).status == 302
    assert p.call("/_platform/login").status == 302
    assert not p.server.log_events("login_start_refused")


def test_a_burst_of_login_starts_does_not_cancel_the_login_the_user_is_finishing(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)
    mine = p.call("/_platform/login")
    assert mine.status == 302, mine
    # While the user is at the IdP: frames of another site, then forty top-level starts from it.
    framed = [p.call("/_platform/login", headers=cross_site("iframe")).status for _ in range(10)]
    answers = [p.call("/_platform/login", headers=cross_site("document")) for _ in range(40)]
    # The user's login completes.
    back = http_call(mine.header("location"))
    assert back.status == 302, back
    done = http_call(back.header("location"))
    assert done.status == 200 and b"You are signed in" in done.body, done
    p.wait_state("logged_in", timeout=5)
    # The frames were refused; the starts past the table's size were too, saying when to come back.
    assert framed == [403] * 10, framed
    statuses = [r.status for r in answers]
    busy = [r for r in answers if r.status == 429]
    assert busy and statuses.count(302) + len(busy) == 40, statuses
    assert busy[0].json()["error"] == "too_many_logins", busy[0]
    assert 1 <= int(busy[0].header("retry-after")) <= 600, busy[0].headers
    assert p.server.log_events("login_start_refused")
    # Its place is free again.
    assert p.call("/_platform/login").status == 302


def test_another_site_cannot_keep_the_user_from_starting_a_login(start_proxy, idp_factory, tmp_path):
    # A page that opened one popup can navigate it to the login again and again (each a top-level
    # navigation from another site): it must not fill the table the user's own starts need.
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)
    answers = [p.call("/_platform/login", headers=cross_site("document")).status for _ in range(40)]
    assert 429 in answers and set(answers) == {302, 429}, answers
    # The user types the address, or the proxy's own page or a local app's links to it: started
    # all the same.
    for headers in ({}, {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
                    cross_site("document", site="same-origin"), cross_site("document", site="same-site")):
        mine = p.call("/_platform/login", headers=headers)
        assert mine.status == 302, (headers, mine)
    back = http_call(mine.header("location"))
    assert back.status == 302, back
    done = http_call(back.header("location"))
    assert done.status == 200 and b"You are signed in" in done.body, done
    p.wait_state("logged_in", timeout=5)


def test_a_burst_of_starts_does_not_cancel_a_phased_login_in_progress(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    location, _ = authorize_redirect(p)
    starts = [p.call("/_platform/login", headers=cross_site("document")).status for _ in range(40)]
    # The chain goes on: platform signed in, the browser sent on to ping silently.
    browser = Browser()
    callback = browser._call(location).header("location")
    step = browser._call(callback)
    assert step.status == 302, step
    assert parse_qs(urlsplit(step.header("location")).query)["prompt"] == ["none"]
    assert providers_state(p)["platform"] == "logged_in"
    assert 429 in starts and set(starts) <= {302, 429}, starts
