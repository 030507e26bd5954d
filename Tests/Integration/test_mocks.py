"""Mock and record (docs/mocks.md), end to end against the real binary on loopback:
replay from a folder (files, index.json, folders served in name order and
looping, 404 naming the file, traversal refused), record mode writing 2xx
bodies into the same layout, the top-level ``"mock": true`` switch and the
run-time switch ``POST /_platform/mock``.

The recording upstream (``upstream.py``) is the authority on whether a request
was forwarded; the mock folders on disk are the authority on what was recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from proxy import ResponseReader, base_config, build_request
from test_forwarding import assert_error_json
from upstream import Upstream


def path_id(value) -> str:
    """Test ids become temp-dir names in the harness: no slashes."""
    return str(value).strip("/").replace("/", "_").replace("%", "pct") or "root"


def wait_until(predicate, timeout: float = 2.0, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# --------------------------------------------------------------------------- fixtures


class Dirs:
    """The mock folders of one test."""

    def __init__(self, root: Path):
        self.root = root
        self.replay = root / "replay"          # route "m": replay only, no upstream
        self.empty = root / "empty"            # route "empty": replay, no files at all
        self.record = root / "record" / "deep"  # route "rec": record (does not exist yet)
        self.overwrite = root / "overwrite"    # route "recow": record with overwrite
        self.switch = root / "switch"          # route "sw": upstream + replay, for the run-time switch
        self.off = root / "off"                # route "offr": upstream + mode off
        self.blocker = root / "a-regular-file"  # route "broken": its mock dir lives under this file


REPLAY_FILES = {
    "users/me.json": b'{"name": "Me", "id": 1}\n',
    "index.json": b'{"mock": "index"}',
    "seq/c.json": b'{"seq": "c"}',          # written first, served last: order is by name
    "seq/a.json": b'{"seq": "a"}',
    "seq/b.json": b'{"seq": "b"}',
    "deep/er/still.json": b'{"deep": true}',
}

SECRET_OUTSIDE = b'{"secret": "outside-the-mock-folder"}'


def write_files(directory: Path, files: dict[str, bytes]) -> None:
    for name, body in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def mock_routes(up: Upstream, d: Dirs) -> list[dict]:
    base = up.url("/base/")
    return [
        {"name": "m", "path": "/m/", "mock": {"directory": str(d.replay), "mode": "replay"}},
        {"name": "empty", "path": "/empty/", "mock": {"directory": str(d.empty)}},
        {"name": "rec", "path": "/rec/", "upstream": base, "timeoutSeconds": 10,
         "mock": {"directory": str(d.record), "mode": "record"}},
        {"name": "recow", "path": "/recow/", "upstream": base, "timeoutSeconds": 10,
         "mock": {"directory": str(d.overwrite), "mode": "record", "overwrite": True}},
        {"name": "sw", "path": "/sw/", "upstream": base, "timeoutSeconds": 10,
         "mock": {"directory": str(d.switch), "mode": "replay"}},
        {"name": "offr", "path": "/offr/", "upstream": base, "timeoutSeconds": 10,
         "mock": {"directory": str(d.off), "mode": "off"}},
        {"name": "plain", "path": "/plain/", "upstream": base, "timeoutSeconds": 10},
        {"name": "broken", "path": "/broken/", "upstream": base, "timeoutSeconds": 10,
         "mock": {"directory": str(d.blocker / "sub"), "mode": "record"}},
    ]


@pytest.fixture
def dirs(tmp_path) -> Dirs:
    d = Dirs(tmp_path / "mocks")
    write_files(d.replay, REPLAY_FILES)
    (d.root / "secret.json").write_bytes(SECRET_OUTSIDE)     # a sibling a traversal would reach
    (d.replay.parent / "replay-secret.json").write_bytes(SECRET_OUTSIDE)
    d.empty.mkdir(parents=True)
    d.overwrite.mkdir(parents=True)
    write_files(d.switch, {"item.json": b'{"from": "switch-folder"}'})
    write_files(d.off, {"item.json": b'{"from": "off-folder"}'})
    d.blocker.write_text("I am a regular file, so nothing can be created under me.\n")
    return d


@pytest.fixture
def make_mocks(start_proxy, main_upstream, dirs):
    def _make(route_changes: dict | None = None, **overrides):
        routes = mock_routes(main_upstream, dirs)
        for route in routes:
            route.update((route_changes or {}).get(route["name"], {}))
        cfg = base_config(None, routes=routes, **overrides)
        server = start_proxy(config=cfg, name="mocks")
        server.upstream = main_upstream
        server.dirs = dirs
        return server

    return _make


@pytest.fixture
def mocks(make_mocks):
    return make_mocks()


def switch(server, route: str, mode: str):
    return server.request("POST", "/_platform/mock", body=json.dumps({"route": route, "mode": mode}).encode())


def assert_json_200(r, body: bytes):
    assert r.status == 200, str(r)
    ctype = (r.header("content-type") or "").split(";")[0].strip()
    assert ctype == "application/json", f"Content-Type {ctype!r}:\n{r}"
    assert r.body == body, f"expected {body!r}, got {r.body!r}"


# --------------------------------------------------------------------------- replay


def test_replay_serves_rest_of_path_dot_json_as_200_application_json(mocks):
    assert_json_200(mocks.get("/m/users/me"), REPLAY_FILES["users/me.json"])
    assert_json_200(mocks.get("/m/deep/er/still"), REPLAY_FILES["deep/er/still.json"])


@pytest.mark.parametrize("query", ["?x=1", "?users=other&page=2", "?"])
def test_replay_ignores_the_query(mocks, query):
    assert_json_200(mocks.get("/m/users/me" + query), REPLAY_FILES["users/me.json"])


@pytest.mark.parametrize("path", ["/m/", "/m", "/m/?q=1"], ids=path_id)
def test_replay_of_the_route_root_serves_index_json(mocks, path):
    assert_json_200(mocks.get(path), REPLAY_FILES["index.json"])


def test_replay_of_a_folder_serves_its_files_in_name_order_looping(mocks):
    got = [mocks.get("/m/seq").json()["seq"] for _ in range(7)]
    assert got == ["a", "b", "c", "a", "b", "c", "a"], got


def test_replay_of_a_folder_loops_over_keepalive_and_across_connections(mocks):
    seen = []
    with mocks.connect() as s:
        reader = ResponseReader(s)
        for _ in range(2):
            s.sendall(build_request("GET", "/m/seq/", {"Host": mocks.host_header}))
            seen.append(reader.read_response().json()["seq"])
    seen.append(mocks.get("/m/seq/").json()["seq"])
    assert seen == ["a", "b", "c"], seen


def test_missing_mock_file_gets_404_mock_not_found_naming_the_file(mocks):
    r = mocks.get("/m/nope/x?y=1")
    body = assert_error_json(r, 404, "mock_not_found")
    # Named relative to the mock folder: the absolute path is the proxy's business.
    assert "nope/x.json" in body["message"], body["message"]
    assert str(mocks.dirs.replay) not in body["message"], body["message"]


def test_missing_index_json_gets_404_naming_index_json(mocks):
    body = assert_error_json(mocks.get("/empty/"), 404, "mock_not_found")
    assert "index.json" in body["message"], body["message"]
    assert str(mocks.dirs.empty) not in body["message"], body["message"]


def test_mock_only_route_never_contacts_an_upstream(mocks):
    for path in ("/m/users/me", "/m/nope", "/m/"):
        mocks.get(path)
    assert not mocks.upstream.records, mocks.upstream.dump()


TRAVERSALS = [
    "/m/../secret",
    "/m/../replay-secret",
    "/m/..",
    "/m/x/../../secret",
    "/m/%2e%2e/secret",
    "/m/%2E%2E/replay-secret",
    "/m/.%2e/secret",
    "/m/%2e./secret",
    "/m/..%2fsecret",
    "/m/%2e%2e%2fsecret",
    "/m/users%2fme",                 # an encoded slash, even to a file that exists
    "/m/users%2Fme",
    "/m/./users/me",
]


@pytest.mark.parametrize("path", TRAVERSALS, ids=path_id)
def test_replay_traversal_is_refused_400_invalid_path(mocks, path):
    ex = mocks.exchange(build_request("GET", path, {"Host": mocks.host_header, "Connection": "close"}), timeout=5)
    assert ex.final is not None, f"{path}: {ex.outcome} {ex.data[:300]!r}"
    assert_error_json(ex.final, 400, "invalid_path")
    assert SECRET_OUTSIDE not in ex.data, f"{path} served a file outside the mock folder"


# --------------------------------------------------------------------------- record


def test_record_mode_forwards_and_writes_the_2xx_body_to_rest_dot_json(mocks):
    d = mocks.dirs
    assert not d.record.exists()
    r = mocks.get("/rec/users/42?expand=1")
    assert r.status == 200, str(r)
    rec = mocks.upstream.records[-1]
    assert rec.target == "/base/users/42?expand=1", str(rec)
    path = d.record / "users" / "42.json"
    assert wait_until(path.exists), f"{path} was not written; folder holds {sorted(map(str, d.root.rglob('*')))}"
    assert path.read_bytes() == r.body, "the recorded file differs from the body the client got"
    assert not list(d.record.rglob("*.tmp*")), "a temporary file was left behind"


def test_record_mode_writes_the_route_root_to_index_json(mocks):
    r = mocks.get("/rec/")
    assert r.status == 200, str(r)
    path = mocks.dirs.record / "index.json"
    assert wait_until(path.exists), f"{path} was not written"
    assert path.read_bytes() == r.body


def test_record_mode_does_not_overwrite_an_existing_file(mocks):
    d = mocks.dirs
    d.record.mkdir(parents=True)
    kept = b'{"recorded": "earlier"}'
    (d.record / "keep.json").write_bytes(kept)
    r = mocks.get("/rec/keep")
    assert r.status == 200 and r.body != kept, str(r)
    assert len(mocks.upstream.records) == 1, "record mode must forward even when the file exists"
    time.sleep(0.3)
    assert (d.record / "keep.json").read_bytes() == kept, "record mode overwrote an existing file"
    # and a file it recorded itself is not replaced by a later, different response
    first = mocks.get("/rec/again?n=1")
    path = d.record / "again.json"
    assert wait_until(path.exists)
    second = mocks.get("/rec/again?n=2")
    assert first.body != second.body
    time.sleep(0.3)
    assert path.read_bytes() == first.body, "the second response replaced the first recording"


def test_record_mode_with_overwrite_replaces_the_file(mocks):
    path = mocks.dirs.overwrite / "item.json"
    path.write_bytes(b'{"old": true}')
    r1 = mocks.get("/recow/item?n=1")
    assert r1.status == 200
    assert wait_until(lambda: path.read_bytes() == r1.body), f"overwrite: {path.read_bytes()!r}"
    r2 = mocks.get("/recow/item?n=2")
    assert wait_until(lambda: path.read_bytes() == r2.body), f"overwrite: {path.read_bytes()!r}"


@pytest.mark.parametrize("code", [400, 404, 500, 503])
def test_record_mode_does_not_write_non_2xx_responses(mocks, code):
    r = mocks.get(f"/rec/status?code={code}")
    assert r.status == code, str(r)
    time.sleep(0.3)
    record_root = mocks.dirs.record.parent
    written = [p for p in record_root.rglob("*") if p.is_file()] if record_root.exists() else []
    assert not written, f"a {code} response was recorded: {written}"


def test_record_mode_does_not_write_an_unfollowed_redirect(make_mocks, main_upstream, dirs):
    server = make_mocks(route_changes={"rec": {"redirects": {"follow": False}}})
    to = main_upstream.url("/base/elsewhere")
    r = server.get(f"/rec/redirect?status=302&to={to}")
    assert r.status == 302, str(r)
    time.sleep(0.3)
    assert not (dirs.record / "redirect.json").exists(), "a 302 body was recorded"


def test_record_write_failure_is_logged_and_the_client_still_gets_its_response(mocks):
    r = mocks.get("/broken/users/1")
    assert r.status == 200, str(r)
    assert r.json()["target"] == "/base/users/1", str(r)
    events = wait_until(lambda: mocks.log_events("mock_record_failed"))
    assert events, "no mock_record_failed log line:\n" + mocks.stderr_text()[-2000:]
    assert str(mocks.dirs.blocker / "sub") in json.dumps(events[-1]), events[-1]
    # the proxy keeps serving
    assert mocks.get("/broken/users/2").status == 200
    assert mocks.get("/_platform/health").status == 200


def test_record_mode_never_writes_an_encoded_slash_path(mocks):
    def files():
        return {str(p) for p in mocks.dirs.root.rglob("*")}

    before = files()
    r = mocks.get("/rec/a%2fb")
    assert r.status in (200, 400), str(r)
    time.sleep(0.3)
    assert files() == before, f"new files: {sorted(files() - before)}"


def test_recorded_folder_replays_what_was_recorded(mocks):
    rec = mocks.dirs.record
    bodies = {}
    for path in ("/rec/", "/rec/users/7", "/rec/a/b/c"):
        r = mocks.get(path)
        assert r.status == 200
        bodies[path] = r.body
    assert wait_until(lambda: (rec / "a" / "b" / "c.json").exists())
    assert switch(mocks, "rec", "replay").status == 200
    mocks.upstream.clear()
    for path, body in bodies.items():
        assert_json_200(mocks.get(path), body)
    assert not mocks.upstream.records, f"replay forwarded:\n{mocks.upstream.dump()}"


# --------------------------------------------------------------------------- mode off, global switch


def test_mode_off_forwards_and_ignores_the_folder(mocks):
    r = mocks.get("/offr/item")
    assert r.status == 200, str(r)
    assert r.json()["target"] == "/base/item", str(r)
    assert len(mocks.upstream.records) == 1


def test_global_mock_true_makes_every_route_with_a_mock_folder_replay(make_mocks, dirs):
    write_files(dirs.record, {"users/9.json": b'{"from": "record-folder"}'})
    server = make_mocks(mock=True)
    assert_json_200(server.get("/rec/users/9"), b'{"from": "record-folder"}')
    assert_json_200(server.get("/offr/item"), b'{"from": "off-folder"}')
    assert_json_200(server.get("/sw/item"), b'{"from": "switch-folder"}')
    assert_json_200(server.get("/m/users/me"), REPLAY_FILES["users/me.json"])
    assert not server.upstream.records, f"an upstream was called:\n{server.upstream.dump()}"
    # a missing file is a 404 naming it, not a fallback to the upstream
    body = assert_error_json(server.get("/rec/users/10"), 404, "mock_not_found")
    assert "users/10.json" in body["message"] and str(dirs.record) not in body["message"], body
    assert not server.upstream.records, server.upstream.dump()
    # routes without a mock folder still forward
    assert server.get("/plain/x").status == 200
    assert [x.target for x in server.upstream.records] == ["/base/x"]


def test_global_mock_true_records_nothing(make_mocks, dirs):
    server = make_mocks(mock=True)
    server.get("/rec/users/11")
    time.sleep(0.3)
    assert not (dirs.record / "users" / "11.json").exists()


# --------------------------------------------------------------------------- run-time switch


def test_switch_answers_200_echoing_route_and_mode(mocks):
    for mode in ("off", "record", "replay"):
        r = switch(mocks, "sw", mode)
        assert r.status == 200, str(r)
        assert (r.header("content-type") or "").startswith("application/json"), str(r)
        assert r.json() == {"route": "sw", "mode": mode}, str(r)


def test_switch_off_forwards_and_replay_returns_to_the_folder(mocks):
    assert_json_200(mocks.get("/sw/item"), b'{"from": "switch-folder"}')
    assert not mocks.upstream.records
    assert switch(mocks, "sw", "off").status == 200
    r = mocks.get("/sw/item")
    assert r.status == 200 and r.json()["target"] == "/base/item", f"off did not forward:\n{r}"
    assert len(mocks.upstream.records) == 1
    assert switch(mocks, "sw", "replay").status == 200
    assert_json_200(mocks.get("/sw/item"), b'{"from": "switch-folder"}')
    assert len(mocks.upstream.records) == 1, "replay forwarded"


def test_switch_to_record_writes_the_folder(mocks):
    assert switch(mocks, "sw", "record").status == 200
    r = mocks.get("/sw/new/thing")
    assert r.status == 200 and r.json()["target"] == "/base/new/thing", str(r)
    path = mocks.dirs.switch / "new" / "thing.json"
    assert wait_until(path.exists), f"{path} not recorded after switching to record"
    assert path.read_bytes() == r.body


def test_switch_replay_on_a_mock_only_route_is_accepted(mocks):
    r = switch(mocks, "m", "replay")
    assert r.status == 200 and r.json() == {"route": "m", "mode": "replay"}, str(r)
    assert_json_200(mocks.get("/m/users/me"), REPLAY_FILES["users/me.json"])


def test_switch_off_overrides_a_record_route(mocks):
    assert switch(mocks, "rec", "off").status == 200
    assert mocks.get("/rec/users/5").status == 200
    time.sleep(0.3)
    assert not (mocks.dirs.record / "users" / "5.json").exists(), "off still recorded"


BAD_SWITCHES = [
    ("unknown-route", b'{"route": "nope", "mode": "replay"}'),
    ("bad-mode", b'{"route": "sw", "mode": "live"}'),
    ("mode-case", b'{"route": "sw", "mode": "REPLAY"}'),
    ("no-mock-dir", b'{"route": "plain", "mode": "replay"}'),
    ("record-without-upstream", b'{"route": "m", "mode": "record"}'),
    ("off-without-upstream", b'{"route": "m", "mode": "off"}'),
    ("missing-mode", b'{"route": "sw"}'),
    ("missing-route", b'{"mode": "off"}'),
    ("route-not-string", b'{"route": 5, "mode": "off"}'),
    ("not-json", b'route=sw&mode=off'),
    ("empty-body", b""),
    ("array", b'["sw", "off"]'),
]


@pytest.mark.parametrize("body", [b for _, b in BAD_SWITCHES], ids=[i for i, _ in BAD_SWITCHES])
def test_bad_switch_gets_400_invalid_request_and_changes_nothing(mocks, body):
    r = mocks.request("POST", "/_platform/mock", body=body)
    assert_error_json(r, 400, "invalid_request")
    assert_json_200(mocks.get("/sw/item"), b'{"from": "switch-folder"}')
    assert_json_200(mocks.get("/m/users/me"), REPLAY_FILES["users/me.json"])
    assert not mocks.upstream.records


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_switch_endpoint_refuses_other_methods_405(mocks, method):
    r = mocks.request(method, "/_platform/mock")
    assert_error_json(r, 405, "method_not_allowed")
    assert "POST" in (r.header("Allow") or ""), str(r)


def test_switch_overrides_the_global_mock_switch(make_mocks):
    server = make_mocks(mock=True)
    assert_json_200(server.get("/sw/item"), b'{"from": "switch-folder"}')
    assert switch(server, "sw", "off").status == 200
    r = server.get("/sw/item")
    assert r.status == 200 and r.json()["target"] == "/base/item", f"off under mock:true did not forward:\n{r}"


def test_switch_is_logged(mocks):
    assert switch(mocks, "sw", "off").status == 200
    events = wait_until(lambda: mocks.log_events("mock_switched"))
    assert events and events[-1].get("route") == "sw" and events[-1].get("mode") == "off", events


# --------------------------------------------------------------------------- secrets, planted files and races


class _Peer:
    """A tiny threaded HTTP server answering every request with ``answer(handler) -> (status, body)``."""

    def __init__(self, answer):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self._reply()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._reply()

            def _reply(self):
                status, body = answer(self)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_record_mode_never_writes_a_token_refreshed_after_a_401_even_with_masking_off(start_proxy, tmp_path):
    """Was: the recorder masked only the token of the first send, so with
    `maskEchoedCredentials: false` the retry's refreshed token, echoed, was written to disk."""
    issued: list[str] = []

    def token_endpoint(_):
        issued.append(f"RECORDED-SECRET-{len(issued) + 1:04d}-abcdefgh")
        return 200, json.dumps({"access_token": issued[-1], "token_type": "Bearer", "expires_in": 3600}).encode()

    def upstream(handler):
        auth = handler.headers.get("Authorization", "")
        if auth.endswith(issued[0]):  # the first token is refused upstream
            return 401, b'{"error":"expired"}'
        return 200, json.dumps({"whoami": auth}).encode()

    idp, up = _Peer(token_endpoint), _Peer(upstream)
    folder = tmp_path / "recorded"
    try:
        server = start_proxy(config=base_config(
            None, maskEchoedCredentials=False,
            provider={"grant": "client_credentials", "tokenEndpoint": f"http://127.0.0.1:{idp.port}/token",
                      "clientID": "c", "clientSecret": "s", "minRefreshIntervalSeconds": 0},
            routes=[{"name": "api", "path": "/api/", "upstream": f"http://127.0.0.1:{up.port}/",
                     "credential": "access_token", "retryOn401": True,
                     "mock": {"directory": str(folder), "mode": "record"}}]))
        assert wait_until(lambda: server.get("/_platform/ready").status == 200, 5)
        r = server.get("/api/me")
        assert r.status == 200 and len(issued) == 2, (str(r), issued)
        assert issued[1] in r.json()["whoami"], "the client sees the echo: masking is off"
        recorded = wait_until(lambda: (folder / "me.json").exists() and (folder / "me.json").read_text())
        assert recorded and not any(token in recorded for token in issued), recorded
    finally:
        idp.close()
        up.close()


def test_release_profile_refuses_switching_a_mock_on_at_run_time(start_proxy, main_upstream, tmp_path):
    """`release` makes a replay or record route a config error; the switch may not undo that."""
    folder = tmp_path / "off-folder"
    folder.mkdir()
    config = base_config(None, routes=[{"name": "api", "path": "/api/", "upstream": main_upstream.url("/"),
                                        "mock": {"directory": str(folder), "mode": "off"}}],
                         profiles={"release": {}})
    server = start_proxy(config=config, env={"PLATFORM_PROXY_PROFILE": "release"})
    assert server.get("/_platform/health").json()["profile"] == "release"
    for mode in ("record", "replay"):
        assert_error_json(switch(server, "api", mode), 403, "mock_not_allowed")
    assert switch(server, "api", "off").status == 200
    assert server.get("/api/x").status == 200
    assert not any(folder.iterdir()), "something was recorded"


def test_record_mode_does_not_follow_a_symlinked_folder_planted_in_the_mock_folder(mocks, tmp_path):
    """A link inside the mock folder cannot steer a recording out of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    mocks.dirs.record.mkdir(parents=True, exist_ok=True)
    (mocks.dirs.record / "linked").symlink_to(outside, target_is_directory=True)
    r = mocks.get("/rec/linked/users/1")
    assert r.status == 200, str(r)  # the client still gets its response
    events = wait_until(lambda: mocks.log_events("mock_record_failed"))
    assert events and "symlink" in json.dumps(events[-1]), mocks.stderr_text()[-2000:]
    assert not any(outside.rglob("*")), list(outside.rglob("*"))


def test_simultaneous_recordings_of_one_path_never_leave_a_mixed_or_empty_file(start_proxy, main_upstream, tmp_path):
    """Was: both loops wrote one temp file `<file>.tmp-<pid>`,
    so the file could end up empty or one body with the tail of another (6 of 400 bursts)."""
    import http.client
    import threading

    folder = tmp_path / "rec"
    server = start_proxy(config=base_config(None, workers=2, log={"access": False}, routes=[
        {"name": "rec", "path": "/rec/", "upstream": main_upstream.url("/"),
         "mock": {"directory": str(folder), "mode": "record", "overwrite": True}}]))
    conns = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(6)]
    bad: list[bytes] = []
    started = time.monotonic()
    bursts = 0
    while bursts < 200 and time.monotonic() - started < 8:
        barrier = threading.Barrier(len(conns))

        def get(conn, pad):
            barrier.wait()
            conn.request("GET", "/rec/item?pad=" + "p" * pad)
            conn.getresponse().read()
        threads = [threading.Thread(target=get, args=(c, (10, 4000, 50000)[k % 3])) for k, c in enumerate(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        data = (folder / "item.json").read_bytes()
        try:
            json.loads(data)
        except ValueError:
            bad.append(data[:80])
        bursts += 1
    for c in conns:
        c.close()
    assert bursts >= 50, bursts
    assert not bad, f"{len(bad)} of {bursts} bursts left a broken file: {bad[:3]}"
    # The last burst's recordings may still be landing (the file is written when the upstream's
    # transfer ends, which can follow the client's last byte); a temporary left behind stays.
    deadline = time.monotonic() + 3
    while [p for p in folder.iterdir() if ".tmp-" in p.name] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in folder.iterdir() if ".tmp-" in p.name], list(folder.iterdir())


def test_a_fifo_in_a_replay_folder_is_not_a_mock_file_and_never_blocks_the_loop(start_proxy, tmp_path):
    """Was: open(2) on the FIFO blocked the event loop until
    some writer opened it, and every request on that loop waited."""
    import os

    folder = tmp_path / "replay"
    write_files(folder, {"ok.json": b'{"ok": true}'})
    os.mkfifo(folder / "pipe.json")
    server = start_proxy(config=base_config(None, workers=1, routes=[
        {"name": "m", "path": "/m/", "mock": {"directory": str(folder), "mode": "replay"}}]))
    started = time.monotonic()
    r = server.get("/m/pipe")
    assert_error_json(r, 404, "mock_not_found")
    assert time.monotonic() - started < 2
    assert server.get("/m/ok").status == 200
