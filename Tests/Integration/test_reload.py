"""Hot reload on SIGHUP (docs/operations.md), end to end: a valid changed config serves
new requests within 2 s while requests already in flight finish under the old
one; an invalid config is logged (``config_reload_failed``) with every error
and the old config keeps serving. Only the PID this test started is signalled.
"""

from __future__ import annotations

import copy
import json
import signal
import threading
import time

import pytest

from proxy import ResponseReader, base_config, build_request, run_cli, write_mock_dir
from test_forwarding import assert_error_json
from upstream import Upstream

RELOAD_WITHIN = 2.0


def wait_until(predicate, timeout: float = RELOAD_WITHIN, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


ACCESS_A = "reload-token-a-0123456789abcdef"
ACCESS_B = "reload-token-b-fedcba9876543210"


@pytest.fixture
def reloadable(start_proxy, main_upstream, tmp_path):
    """A proxy with an ``api`` route (credentialed) and a mock route ``/m/`` on folder ``one``."""
    one = write_mock_dir(tmp_path / "one", {"a": {"folder": "one"}})
    two = write_mock_dir(tmp_path / "two", {"a": {"folder": "two"}})
    cfg = base_config(None, provider={"grant": "static", "accessToken": ACCESS_A},
                      routes=[
                          {"name": "api", "path": "/api/", "upstream": main_upstream.url("/base/"),
                           "credential": "access_token", "timeoutSeconds": 10},
                          {"name": "m", "path": "/m/", "mock": {"directory": str(one)}},
                      ])
    server = start_proxy(config=cfg, name="reload")
    server.main = main_upstream
    server.folders = (one, two)
    return server


def reload_with(server, config: dict | str) -> None:
    """Write the config file (whole, then rename) and send SIGHUP to our own proxy."""
    text = config if isinstance(config, str) else json.dumps(config, indent=2)
    tmp = server.config_path.with_name(server.config_path.name + ".new")
    tmp.write_text(text)
    tmp.replace(server.config_path)
    server.signal(signal.SIGHUP)


def wait_for_event(server, event: str, count: int = 1, timeout: float = RELOAD_WITHIN) -> list[dict]:
    events = wait_until(lambda: len(server.log_events(event)) >= count and server.log_events(event), timeout)
    assert events and len(events) >= count, \
        f"no {count}x {event!r} log line within {timeout}s:\n{server.stderr_text()[-3000:]}"
    return events


def changed(server, fn) -> dict:
    cfg = copy.deepcopy(server.config)
    fn(cfg)
    return cfg


# --------------------------------------------------------------------------- valid reloads


def test_sighup_with_an_added_route_serves_it_within_two_seconds(reloadable, other_upstream):
    assert_error_json(reloadable.get("/added/echo"), 404, "no_route")
    cfg = changed(reloadable, lambda c: c["routes"].append(
        {"name": "added", "path": "/added/", "upstream": other_upstream.url("/two/"), "credential": "none"}))
    start = time.monotonic()
    reload_with(reloadable, cfg)
    r = wait_until(lambda: (lambda r: r if r.status == 200 else None)(reloadable.get("/added/echo")))
    took = time.monotonic() - start
    assert r, f"the added route was not served {RELOAD_WITHIN}s after SIGHUP:\n{reloadable.get('/added/echo')}"
    assert r.json()["target"] == "/two/echo", str(r)
    assert other_upstream.records[-1].target == "/two/echo"
    print(f"\nadded route served {took:.3f}s after SIGHUP")
    events = wait_for_event(reloadable, "config_reloaded")
    assert events[-1].get("level") == "info", events[-1]
    # the old routes keep working
    assert reloadable.get("/api/echo").status == 200
    assert reloadable.get("/m/a").json() == {"folder": "one"}


def test_sighup_with_a_changed_mock_directory_serves_the_new_folder(reloadable):
    one, two = reloadable.folders
    assert reloadable.get("/m/a").json() == {"folder": "one"}
    reload_with(reloadable, changed(reloadable, lambda c: c["routes"][1]["mock"].update(directory=str(two))))
    r = wait_until(lambda: (lambda r: r if r.status == 200 and r.json() == {"folder": "two"} else None)(
        reloadable.get("/m/a")))
    assert r, f"still serving the old folder {RELOAD_WITHIN}s after SIGHUP: {reloadable.get('/m/a')}"
    wait_for_event(reloadable, "config_reloaded")


def test_sighup_with_a_removed_route_stops_serving_it(reloadable):
    reload_with(reloadable, changed(reloadable, lambda c: c["routes"].pop(0)))
    r = wait_until(lambda: (lambda r: r if r.status == 404 else None)(reloadable.get("/api/echo")))
    assert r, "the removed route still answers"
    assert_error_json(r, 404, "no_route")


def test_in_flight_request_started_before_sighup_completes(reloadable):
    result: dict = {}

    def slow():
        try:
            result["response"] = reloadable.get("/api/stall?seconds=2", timeout=15)
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=slow)
    t.start()
    assert reloadable.main.wait_for(lambda recs: any(r.path == "/base/stall" for r in recs), timeout=5), \
        "the slow request never reached the upstream"
    # the new config drops the route the in-flight request is using
    reload_with(reloadable, changed(reloadable, lambda c: c["routes"].pop(0)))
    wait_for_event(reloadable, "config_reloaded")
    r = wait_until(lambda: (lambda r: r if r.status == 404 else None)(reloadable.get("/api/echo")))
    assert r, "the new config is not in force while the slow request is in flight"
    t.join(timeout=15)
    assert "error" not in result, f"the in-flight request failed across the reload: {result['error']}"
    resp = result["response"]
    assert resp.status == 200, f"the in-flight request did not complete:\n{resp}"
    assert resp.json()["target"] == "/base/stall?seconds=2", str(resp)
    assert t.is_alive() is False


def test_keepalive_connection_opened_before_reload_gets_the_new_config(reloadable, other_upstream):
    with reloadable.connect() as s:
        reader = ResponseReader(s, timeout=5)
        s.sendall(build_request("GET", "/added/x", {"Host": reloadable.host_header}))
        assert reader.read_response().status == 404
        reload_with(reloadable, changed(reloadable, lambda c: c["routes"].append(
            {"name": "added", "path": "/added/", "upstream": other_upstream.url("/two/")})))
        wait_for_event(reloadable, "config_reloaded")
        deadline = time.monotonic() + RELOAD_WITHIN
        while True:
            s.sendall(build_request("GET", "/added/x", {"Host": reloadable.host_header}))
            r = reader.read_response()
            if r.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status == 200, f"the old keep-alive connection still uses the old config:\n{r}"


def test_reload_with_a_new_static_token_sends_it_on_new_requests(reloadable):
    assert reloadable.get("/api/echo").status == 200
    assert reloadable.main.records[-1].header("Authorization") == f"Bearer {ACCESS_A}"
    reload_with(reloadable, changed(reloadable, lambda c: c["provider"].update(accessToken=ACCESS_B)))
    wait_for_event(reloadable, "config_reloaded")

    def new_token_used():
        assert reloadable.get("/api/echo").status == 200
        return reloadable.main.records[-1].header("Authorization") == f"Bearer {ACCESS_B}"

    assert wait_until(new_token_used), \
        (f"{RELOAD_WITHIN}s after a reload that changed provider.accessToken the upstream still gets "
         f"{reloadable.main.records[-1].header('Authorization')!r}")


def test_reload_adding_api_key_requires_it_for_new_requests(reloadable):
    key = "reload-proxy-key-5150"
    reload_with(reloadable, changed(reloadable, lambda c: c.update(apiKey=key)))
    wait_for_event(reloadable, "config_reloaded")
    r = wait_until(lambda: (lambda r: r if r.status == 401 else None)(reloadable.get("/api/echo")))
    assert r, "apiKey added by reload is not enforced"
    assert_error_json(r, 401, "proxy_key_required")
    assert reloadable.get("/api/echo", headers={"X-Proxy-Key": key}).status == 200


def test_reload_changing_allowed_hosts_applies_them(reloadable):
    reload_with(reloadable, changed(reloadable, lambda c: c.update(allowedHosts=["only.this.host"])))
    wait_for_event(reloadable, "config_reloaded")
    r = wait_until(lambda: (lambda r: r if r.status == 403 else None)(reloadable.get("/api/echo")))
    assert r, "allowedHosts changed by reload is not enforced"
    assert_error_json(r, 403, "host_not_allowed")
    assert reloadable.get("/api/echo", headers={"Host": "only.this.host"}).status == 200


def test_reload_changing_listen_warns_and_keeps_the_old_listener(reloadable):
    cfg = changed(reloadable, lambda c: c.update(listen=["127.0.0.1:1"]))
    reload_with(reloadable, cfg)
    wait_for_event(reloadable, "config_reloaded")
    wait_for_event(reloadable, "config_reload_partial")
    assert reloadable.get("/api/echo").status == 200


def test_many_reloads_under_load_fail_no_request(reloadable, other_upstream):
    failures: list[str] = []
    stop = threading.Event()

    def client(c: int):
        i = 0
        while not stop.is_set():
            try:
                r = reloadable.get(f"/api/echo?c={c}&i={i}")
                if r.status != 200:
                    failures.append(f"client {c} request {i}: {r}")
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(f"client {c} request {i}: {type(e).__name__}: {e}")
            i += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
    for t in threads:
        t.start()
    try:
        for n in range(8):
            extra = {"name": f"extra{n}", "path": f"/extra{n}/", "upstream": other_upstream.url("/x/")}
            reload_with(reloadable, changed(reloadable, lambda c: c["routes"].append(extra)))
            wait_for_event(reloadable, "config_reloaded", count=n + 1)
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    assert not failures, "\n".join(failures[:10])
    assert reloadable.get("/extra7/y").status == 200
    assert len(reloadable.main.records) > 20, "the load did not run"


def test_a_reload_moving_a_route_and_its_token_together_never_sends_one_upstreams_token_to_the_other(
        start_proxy, tmp_path):
    """Config A: upstream A with token file A; config B: upstream B with token file B. Was: the
    loops took the new routes and, in a later task, the new tokens, so requests between the two
    carried A's token to B."""
    import asyncio

    tokens = {"A": b"TOKEN-FOR-UPSTREAM-A-aaaaaaaaaaaa", "B": b"TOKEN-FOR-UPSTREAM-B-bbbbbbbbbbbb"}
    for name, token in tokens.items():
        (tmp_path / f"{name}.token").write_bytes(token)
    mismatched: list[str] = []
    hits = {"A": 0, "B": 0}

    async def upstream(name, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                hits[name] += 1
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"authorization:") and not line.endswith(tokens[name]):
                        mismatched.append(f"upstream {name} got {line.decode()}")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def run():
        servers = {name: await asyncio.start_server(lambda r, w, n=name: upstream(n, r, w), "127.0.0.1", 0)
                   for name in tokens}
        ports = {name: server.sockets[0].getsockname()[1] for name, server in servers.items()}

        def config(name):
            return base_config(None, workers=2, watchConfig=False, log={"access": False},
                               provider={"grant": "static", "accessToken": {"file": str(tmp_path / f"{name}.token")}},
                               routes=[{"name": "api", "path": "/api/", "upstream": f"http://127.0.0.1:{ports[name]}/",
                                        "credential": "access_token"}])
        proxy = await asyncio.to_thread(start_proxy, config("A"), "race")
        stop = asyncio.Event()

        async def client():
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            while not stop.is_set():
                writer.write(b"GET /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                await writer.drain()
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
            writer.close()

        clients = [asyncio.create_task(client()) for _ in range(8)]
        try:
            for i in range(100):
                reload_with(proxy, config("B" if i % 2 == 0 else "A"))
                await asyncio.sleep(0.03)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*clients, return_exceptions=True), 10)
            for server in servers.values():
                server.close()

    asyncio.run(run())
    assert not mismatched, f"{len(mismatched)} of {sum(hits.values())}: " + "; ".join(mismatched[:5])
    assert hits["A"] > 500 and hits["B"] > 500, hits


def test_a_login_for_an_oauth_provider_added_by_a_reload_says_it_needs_a_restart(start_proxy, main_upstream, tmp_path):
    """Was: "The authorization_code grant has no login: its
    tokens come from the config", which is true of static tokens only."""
    cfg = base_config(None, providers={"a": {"grant": "static", "accessToken": ACCESS_A}},
                      routes=[{"name": "a", "path": "/a/", "upstream": main_upstream.url("/"),
                               "credential": "access_token", "provider": "a"}])
    server = start_proxy(config=cfg, name="add-oauth")
    added = changed(server, lambda c: c["providers"].update(b={
        "grant": "authorization_code", "clientID": "app", "authorizationEndpoint": "http://127.0.0.1:9/authorize",
        "tokenEndpoint": "http://127.0.0.1:9/token", "redirectURI": f"http://{server.address}/_platform/callback"}))
    reload_with(server, added)
    wait_for_event(server, "config_reloaded")
    r = server.get("/_platform/login?provider=b")
    body = assert_error_json(r, 404, "login_unavailable")
    assert "added or changed by a reload" in body["message"] and "restart" in body["message"], body


# --------------------------------------------------------------------------- invalid reloads


def assert_old_config_serves(server):
    r = server.get("/api/echo")
    assert r.status == 200, f"the old config stopped serving:\n{r}"
    assert server.main.records[-1].header("Authorization") == f"Bearer {ACCESS_A}"
    assert server.get("/m/a").json() == {"folder": "one"}


def test_invalid_config_is_logged_with_every_error_and_the_old_config_keeps_serving(reloadable, tmp_path):
    bad = changed(reloadable, lambda c: (
        c.update(routez=[], workers=-3),
        c["routes"].append({"name": "bad one", "path": "no-slash", "upstream": "ftp://example.com/",
                            "credential": "sometimes"}),
        c["routes"].append({"name": "api", "path": "/dup/", "upstream": "http://127.0.0.1:9/"}),
        c["routes"][1].update(timeoutSeconds=-1),
    ))
    # what check-config says about the same file is the list of errors the log must carry
    probe = tmp_path / "bad.json"
    probe.write_text(json.dumps(bad))
    cli = run_cli("check-config", "--config", str(probe))
    assert cli.returncode == 1, cli
    problems = [line.strip() for line in (cli.stdout + cli.stderr).splitlines()[1:] if line.strip()]
    assert len(problems) >= 6, f"check-config found only {problems}"

    reload_with(reloadable, bad)
    events = wait_for_event(reloadable, "config_reload_failed")
    ev = events[-1]
    assert ev.get("level") == "error", ev
    logged = json.dumps(ev)
    text = ev.get("errors")
    text = text if isinstance(text, str) else json.dumps(text)
    for problem in problems:
        assert problem in text or problem in logged, f"{problem!r} missing from the log line:\n{ev}"
    assert not reloadable.log_events("config_reloaded"), "an invalid config was reported as reloaded"
    assert_old_config_serves(reloadable)
    assert_error_json(reloadable.get("/dup/x"), 404, "no_route")


@pytest.mark.parametrize("content", [
    "{ this is not json",
    "",
    "[]",
    '{"listen": ["127.0.0.1:0"], "routes": [{"name": "x", "path": "/x/"}]}',
], ids=["syntax-error", "empty-file", "not-an-object", "route-without-upstream-or-mock"])
def test_unusable_config_keeps_the_old_one(reloadable, content):
    reload_with(reloadable, content)
    wait_for_event(reloadable, "config_reload_failed")
    assert_old_config_serves(reloadable)


def test_missing_config_file_keeps_the_old_one_and_a_later_good_one_loads(reloadable, other_upstream):
    good = reloadable.config
    reloadable.config_path.unlink()
    reloadable.signal(signal.SIGHUP)
    ev = wait_for_event(reloadable, "config_reload_failed")[-1]
    assert str(reloadable.config_path) in json.dumps(ev), f"the failure does not name the file: {ev}"
    assert_old_config_serves(reloadable)
    cfg = copy.deepcopy(good)
    cfg["routes"].append({"name": "added", "path": "/added/", "upstream": other_upstream.url("/two/")})
    reload_with(reloadable, cfg)
    wait_for_event(reloadable, "config_reloaded")
    assert wait_until(lambda: reloadable.get("/added/z").status == 200), "the good config after a bad one did not load"


def test_failed_reload_after_a_good_one_keeps_the_good_one(reloadable, other_upstream):
    cfg = changed(reloadable, lambda c: c["routes"].append(
        {"name": "added", "path": "/added/", "upstream": other_upstream.url("/two/")}))
    reload_with(reloadable, cfg)
    wait_for_event(reloadable, "config_reloaded")
    assert wait_until(lambda: reloadable.get("/added/z").status == 200)
    reload_with(reloadable, "{broken")
    wait_for_event(reloadable, "config_reload_failed")
    time.sleep(0.2)
    assert reloadable.get("/added/z").status == 200, "a failed reload dropped the previous good reload"
    assert reloadable.get("/api/echo").status == 200


def test_process_survives_reloads_and_still_stops_cleanly_on_sigterm(reloadable):
    # one SIGHUP at a time: signals sent before the proxy reads the first one coalesce
    reload_with(reloadable, "{bad")
    wait_for_event(reloadable, "config_reload_failed")
    reload_with(reloadable, json.dumps(reloadable.config))
    wait_for_event(reloadable, "config_reloaded")
    assert reloadable.running
    assert reloadable.stop() == 0
