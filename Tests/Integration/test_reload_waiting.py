"""Requests that wait while the config is reloaded: parked at the awaiting-authorization gate,
waiting on a token refresh, or waiting on the refresh of a 401 retry, while SIGHUP reloads
replace the runtime many times (a route added in front, so route indexes shift; the route's
upstream changed; the routes finally reversed). Each waiting request keeps its own route and
runtime alive through its loop's route slot (docs/performance.md, "Nothing shared is written")
and is answered 200 when it goes on.

The first runtime stays referenced for the whole run, so the requests are parked under a later
one, which only they keep alive. Built with `-Xswiftc -sanitize=address`, these tests report a
heap-use-after-free if the slot stops holding the route and runtime (checked when written).
Only the PID the test started is signalled.
"""
from __future__ import annotations

import copy
import json
import signal
import threading
import time

from credentials_support import idp_factory, launch, login  # noqa: F401 (idp_factory is a fixture)
from test_credentials_refresh import statuses


def _reload(server, cfg: dict, count: int):
    tmp = server.config_path.with_name(server.config_path.name + ".new")
    tmp.write_text(json.dumps(cfg, indent=2))
    tmp.replace(server.config_path)
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while len(server.log_events("config_reloaded")) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(server.log_events("config_reloaded")) >= count, server.stderr_text()[-2000:]


def _alternate(p, idp):
    base = copy.deepcopy(p.config)
    alt = copy.deepcopy(p.config)
    alt["routes"] = [{"name": "pad", "path": "/pad/", "upstream": idp.issuer + "/.well-known/", "credential": "none",
                      "timeoutSeconds": 10}] + copy.deepcopy(alt["routes"])
    for r in alt["routes"]:
        if r["name"] == "api":
            r["upstream"] = idp.issuer + "/api/alt/"
    return base, alt


def _reload_many(p, idp, times: int, reloaded: list):
    base, alt = _alternate(p, idp)
    for n in range(times):
        reloaded[0] += 1
        _reload(p.server, alt if n % 2 == 0 else base, reloaded[0])
        # New requests on both loops move each loop's RouteSlotTable to the new runtime,
        # dropping the table's hold on the old slots (only the parked requests keep them).
        for _ in range(6):
            r = p.call("/open/openid-configuration")
            assert r.status == 200, r
    # End on a runtime that is neither of the ones the parked requests came from.
    reloaded[0] += 1
    final = copy.deepcopy(base)
    final["routes"] = list(reversed(final["routes"]))
    _reload(p.server, final, reloaded[0])
    for _ in range(6):
        p.call("/open/openid-configuration")


def _fresh_runtime(p, idp, reloaded):
    """The first runtime is held for the whole run by ProxyService (waitForSignals' `current`):
    park requests under a later one, which only the parked requests keep alive."""
    base, _ = _alternate(p, idp)
    cfg = copy.deepcopy(base)
    cfg["routes"] = cfg["routes"] + [{"name": "pre", "path": "/pre/", "upstream": idp.issuer + "/.well-known/",
                                      "credential": "none", "timeoutSeconds": 10}]
    reloaded[0] += 1
    _reload(p.server, cfg, reloaded[0])
    time.sleep(0.1)


def _parked(p, n, path):
    out = [None] * n

    def one(i):
        try:
            out[i] = p.call(f"{path}{i}", timeout=40)
        except Exception as e:  # noqa: BLE001
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return out, threads


def _answers(out, threads):
    """The parked requests' statuses once they are answered (30 s each at most)."""
    for t in threads:
        t.join(timeout=30)
    return statuses(out)


def test_requests_parked_at_the_gate_through_twenty_reloads_are_answered_after_login(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, gate={"mode": "wait", "waitSeconds": 30})
    reloaded = [0]
    _fresh_runtime(p, idp, reloaded)
    out, threads = _parked(p, 24, "/api/held/")
    time.sleep(1.0)
    assert all(r is None for r in out), "requests answered before login: %s" % statuses([r for r in out if r])
    _reload_many(p, idp, 20, reloaded)
    assert all(r is None for r in out)
    login(p)
    assert _answers(out, threads) == {200: 24}, (statuses(out), [r for r in out if getattr(r, "status", 0) != 200][:3])
    # A request after all that still works on the final runtime.
    assert p.call("/api/after").status == 200


def test_requests_waiting_on_a_refresh_through_reloads_are_answered(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=3)
    p = launch(start_proxy, idp, tmp_path, refresh_before=1)
    login(p)
    reloaded = [0]
    c = idp.control
    c.delay(token=4.0)
    # The proactive refresh starts ~1 s before expiry and is held 4 s: from expiry on, new
    # requests see an expired snapshot and wait on the single-flight refresh.
    _fresh_runtime(p, idp, reloaded)
    time.sleep(3.0)
    t0 = time.monotonic()
    out, threads = _parked(p, 16, "/api/refresh/")
    time.sleep(0.3)
    _reload_many(p, idp, 6, reloaded)
    answered = _answers(out, threads)
    print(f"\nrefresh-wait burst finished after {time.monotonic() - t0:.2f}s; statuses {answered}; reloads {reloaded[0]}")
    assert answered == {200: 16}, answered
    c.delay(token=0)
    assert p.call("/api/after").status == 200


def test_401_retries_waiting_on_a_refresh_through_reloads_are_answered(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, refresh_before=30)
    login(p)
    reloaded = [0]
    c = idp.control
    _fresh_runtime(p, idp, reloaded)
    c.delay(token=3.0)
    c.expire_all()
    out, threads = _parked(p, 16, "/api/retry/")
    time.sleep(0.5)
    _reload_many(p, idp, 6, reloaded)
    answered = _answers(out, threads)
    print(f"\n401 burst: {answered}; upstream {c.api_counters()}; reloads {reloaded[0]}")
    assert answered == {200: 16}, answered
    c.delay(token=0)
