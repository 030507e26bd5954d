"""Each event loop runs on its own compiled runtime and its own copy of the tokens
(docs/performance.md, "Nothing shared is written"): a mock switch, a config reload and a
token file rotation must still reach every loop. The loop that served a request is the second
field of its X-Request-ID."""
from __future__ import annotations
import json
import time

from proxy import base_config, write_mock_dir
from test_reload import reload_with, changed, wait_until

def loop_of(r):
    """The index of the loop that answered (X-Request-ID is `<process>-<loop>-<counter>`)."""
    return (r.header("x-request-id") or "").split("-")[1]

def test_every_loop_sees_mock_switch_reload_and_token_rotation(start_proxy, main_upstream, tmp_path):
    access = tmp_path / "access"
    access.write_text("tok-one-0123456789abcdef\n")
    folder = write_mock_dir(tmp_path / "m", {"a": {"from": "mock"}})
    cfg = base_config(None, workers=2, provider={"grant": "static", "accessToken": {"file": str(access)}},
                      routes=[{"name": "api", "path": "/api/", "upstream": main_upstream.url("/base/"),
                               "credential": "access_token", "mock": {"directory": str(folder), "mode": "off"}}])
    server = start_proxy(config=cfg, name="loops")
    def sweep(check, n=40):
        loops = set()
        for _ in range(n):
            r = server.get("/api/a")
            loops.add(loop_of(r))
            assert check(r), str(r)
        assert len(loops) == 2, f"only loops {loops} were reached"
    sweep(lambda r: r.status == 200 and r.json().get("target") == "/base/a")
    assert server.request("POST", "/_platform/mock", body=json.dumps({"route": "api", "mode": "replay"}).encode()).status == 200
    sweep(lambda r: r.json() == {"from": "mock"})
    reload_with(server, changed(server, lambda c: c["routes"][0].update(path="/v2/")))
    assert wait_until(lambda: server.get("/api/a").status == 404)
    time.sleep(0.3)
    loops = {loop_of(r) for r in [server.get("/api/a") for _ in range(40)] if r.status == 404}
    assert len(loops) == 2
    reload_with(server, cfg)  # back to /api/, switch reset (off)
    assert wait_until(lambda: server.get("/api/a").status == 200 and server.get("/api/a").json().get("target") == "/base/a")
    access.write_text("tok-two-fedcba9876543210\n")
    assert wait_until(lambda: (server.get("/api/a"), main_upstream.records[-1].header("Authorization"))[1]
                      == "Bearer tok-two-fedcba9876543210", timeout=5)
    main_upstream.clear()
    sweep(lambda r: r.status == 200)
    assert {rec.header("Authorization") for rec in main_upstream.records} == {"Bearer tok-two-fedcba9876543210"}
