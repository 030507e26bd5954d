"""``GET /_platform/metrics`` (docs/operations.md), end to end: the Prometheus text is
parsed with the reference parser (``prometheus_client``), and every counter is
checked against a known set of requests made through the real binary to a real
upstream: requests by route and status, the latency histogram, injected and
stripped credentials, upstream errors by kind, recorded mocks, config reloads
and the open-connection gauge. ``promtool check metrics`` runs when installed.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time

import pytest

from proxy import ResponseReader, base_config, build_request, write_mock_dir
from test_forwarding import assert_error_json, make_tokens, q, static_provider, unused_port
from upstream import Upstream

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"


# --------------------------------------------------------------------------- parsing


@pytest.fixture(scope="module")
def prom_parser():
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        pytest.fail("prometheus-client is not installed: `python3 -m pip install -r Tests/Integration/requirements.txt` "
                    "(the metrics format is validated with the reference parser, not skipped)", pytrace=False)
    return text_string_to_metric_families


class Scrape:
    """One parsed scrape: families by name and sample values by (name, labels)."""

    def __init__(self, text: str, parser):
        self.text = text
        self.families = {f.name: f for f in parser(text)}
        self.samples: dict[tuple[str, frozenset], float] = {}
        for family in self.families.values():
            for s in family.samples:
                key = (s.name, frozenset(s.labels.items()))
                assert key not in self.samples, f"duplicate sample {s.name}{s.labels}:\n{text}"
                self.samples[key] = s.value

    def value(self, name: str, **labels) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def get(self, name: str, **labels) -> float:
        v = self.value(name, **labels)
        return 0.0 if v is None else v

    def series(self, name: str) -> dict[frozenset, float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def family(self, name: str, type_: str):
        # the parser names counter families without their _total suffix
        fam = self.families.get(name) or self.families.get(name.removesuffix("_total"))
        assert fam is not None, f"no metric family {name}; have {sorted(self.families)}"
        assert fam.type == type_, f"{name} is a {fam.type}, expected {type_}"
        return fam


def scrape(server, parser, headers: dict | None = None) -> Scrape:
    r = server.get("/_platform/metrics", headers=headers)
    assert r.status == 200, str(r)
    ctype = r.header("content-type") or ""
    assert ctype.replace(" ", "").startswith(METRICS_CONTENT_TYPE.replace(" ", "")), f"Content-Type {ctype!r}"
    return Scrape(r.body.decode("utf-8"), parser)


def scrape_until(server, parser, predicate, timeout: float = 3.0) -> Scrape:
    """Counters are bumped when a response has been written: poll briefly for the last ones."""
    deadline = time.monotonic() + timeout
    while True:
        s = scrape(server, parser)
        if predicate(s) or time.monotonic() >= deadline:
            return s
        time.sleep(0.05)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def metered(start_proxy, main_upstream, foreign_upstream, tmp_path):
    tokens = make_tokens(tmp_path / "tokens")
    base = main_upstream.url("/base/")
    mock_dir = write_mock_dir(tmp_path / "mock", {"a": {"mock": "a"}})
    routes = [
        {"name": "api", "path": "/api/", "upstream": base, "credential": "access_token",
         "redirects": {"follow": True, "max": 5}, "timeoutSeconds": 10},
        {"name": "open", "path": "/open/", "upstream": base, "credential": "none", "timeoutSeconds": 10},
        {"name": "down", "path": "/down/", "upstream": f"http://127.0.0.1:{unused_port()}/base/",
         "credential": "access_token", "timeoutSeconds": 10},
        {"name": "short", "path": "/short/", "upstream": base, "credential": "access_token", "timeoutSeconds": 1},
        {"name": "rec", "path": "/rec/", "upstream": base, "credential": "none", "timeoutSeconds": 10,
         "mock": {"directory": str(tmp_path / "recorded"), "mode": "record"}},
        {"name": "m", "path": "/m/", "mock": {"directory": str(mock_dir)}},
    ]
    cfg = base_config(None, provider=static_provider(tokens), routes=routes, workers=2)
    server = start_proxy(config=cfg, name="metrics")
    server.main, server.foreign, server.tokens = main_upstream, foreign_upstream, tokens
    return server


def drive_known_traffic(server) -> None:
    """The requests whose counts the tests check (statuses asserted on the way)."""
    for _ in range(3):
        assert server.get("/api/echo").status == 200
    for _ in range(2):
        assert server.get("/api/status?code=404").status == 404
    # one cross-host redirect: followed, the credentials stripped on the foreign hop
    to = server.foreign.url("/base/landing")
    r = server.get(f"/api/redirect?status=302&to={q(to)}")
    assert r.status == 200, str(r)
    assert server.foreign.records[-1].header("Authorization") is None, str(server.foreign.records[-1])
    for _ in range(2):
        assert server.get("/open/echo").status == 200
    assert_error_json(server.get("/down/echo"), 502, "upstream_unreachable")
    assert_error_json(server.get("/short/stall?seconds=3", timeout=10), 504, "upstream_timeout")
    assert server.get("/rec/one").status == 200
    assert server.get("/rec/two").status == 200
    assert server.get("/m/a").status == 200
    assert server.get("/m/missing").status == 404


EXPECTED_REQUESTS = {
    ("api", "200"): 4,   # 3 echo + 1 followed redirect
    ("api", "404"): 2,
    ("open", "200"): 2,
    ("down", "502"): 1,
    ("short", "504"): 1,
    ("rec", "200"): 2,
    ("m", "200"): 1,
    ("m", "404"): 1,
}


def requests_match(s: Scrape) -> bool:
    return all(s.get("platform_proxy_requests_total", route=r, status=st) == n
               for (r, st), n in EXPECTED_REQUESTS.items())


# --------------------------------------------------------------------------- format


def test_metrics_is_valid_prometheus_text_with_every_family_typed(metered, prom_parser):
    s = scrape(metered, prom_parser)
    s.family("platform_proxy_requests_total", "counter")
    s.family("platform_proxy_request_duration_seconds", "histogram")
    s.family("platform_proxy_credentials_injected_total", "counter")
    s.family("platform_proxy_credentials_stripped_total", "counter")
    s.family("platform_proxy_upstream_errors_total", "counter")
    s.family("platform_proxy_mock_recorded_total", "counter")
    s.family("platform_proxy_config_reloads_total", "counter")
    s.family("platform_proxy_open_connections", "gauge")
    assert s.text.endswith("\n"), "the exposition must end with a newline"
    for line in s.text.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP ", "# TYPE ")), line


def test_reload_counters_are_exposed_as_zero_before_any_reload(metered, prom_parser):
    s = scrape(metered, prom_parser)
    assert s.value("platform_proxy_config_reloads_total", result="ok") == 0, s.text
    assert s.value("platform_proxy_config_reloads_total", result="failed") == 0, s.text


def test_metrics_endpoint_refuses_post_405_with_allow(metered):
    r = metered.request("POST", "/_platform/metrics", body=b"")
    assert_error_json(r, 405, "method_not_allowed")
    assert "GET" in (r.header("Allow") or ""), f"405 without Allow (RFC 9110 §15.5.6):\n{r}"


def test_promtool_accepts_the_metrics(metered, prom_parser):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package `prometheus`)")
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser, requests_match)
    p = subprocess.run([promtool, "check", "metrics"], input=s.text, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"promtool check metrics failed:\n{p.stdout}\n{p.stderr}\n--- text:\n{s.text}"


# --------------------------------------------------------------------------- counters against known traffic


def test_requests_total_counts_each_route_and_status(metered, prom_parser):
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser, requests_match)
    for (route, status), n in EXPECTED_REQUESTS.items():
        got = s.get("platform_proxy_requests_total", route=route, status=status)
        assert got == n, f"requests_total{{route={route},status={status}}} = {got}, expected {n}\n{s.text}"
    # nothing invented for routes that were not called with other statuses
    routes = {dict(labels)["route"] for labels in s.series("platform_proxy_requests_total")}
    assert {"api", "open", "down", "short", "rec", "m"} <= routes, routes


def test_requests_total_keeps_counting(metered, prom_parser):
    s0 = scrape(metered, prom_parser)
    before = s0.get("platform_proxy_requests_total", route="open", status="200")
    for _ in range(5):
        assert metered.get("/open/echo").status == 200
    s = scrape_until(metered, prom_parser,
                     lambda s: s.get("platform_proxy_requests_total", route="open", status="200") == before + 5)
    assert s.get("platform_proxy_requests_total", route="open", status="200") == before + 5, s.text


def test_latency_histogram_is_cumulative_and_consistent(metered, prom_parser):
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser, requests_match)
    fam = s.family("platform_proxy_request_duration_seconds", "histogram")
    routes = sorted({smp.labels.get("route") for smp in fam.samples})
    assert routes and None not in routes, f"every latency series carries a route label: {routes}\n{s.text}"
    total_count = 0
    slow = None
    for route in routes:
        buckets = [(smp.labels["le"], smp.value) for smp in fam.samples
                   if smp.name.endswith("_bucket") and smp.labels["route"] == route]
        les = [le for le, _ in buckets]
        assert les and les[-1] == "+Inf", f"{route}: the last bucket is {les[-1:]!r}, expected +Inf"
        bounds = [float(le) for le in les]
        assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds), f"{route}: bucket bounds out of order: {les}"
        values = [v for _, v in buckets]
        assert all(a <= b for a, b in zip(values, values[1:])), f"{route}: buckets not cumulative: {buckets}"
        count = s.value("platform_proxy_request_duration_seconds_count", route=route)
        total = s.value("platform_proxy_request_duration_seconds_sum", route=route)
        assert count is not None and total is not None, s.text
        assert values[-1] == count, f"{route}: le=+Inf {values[-1]} != _count {count}"
        # every answered request of the route is observed once: histogram and counter agree
        requests = sum(v for labels, v in s.series("platform_proxy_requests_total").items()
                       if dict(labels).get("route") == route)
        assert count == requests, f"{route}: histogram _count {count} != requests_total {requests}\n{s.text}"
        total_count += count
        if total >= 0.9:
            slow = (route, dict(buckets).get("0.5"), count)
    # the 504 took about a second (timeoutSeconds 1): visible in its route's sum and buckets
    assert slow is not None, f"no route's _sum reaches the ~1 s of the 504\n{s.text}"
    route, under_half_second, count = slow
    assert under_half_second is not None and under_half_second <= count - 1, \
        f"{route}: le=0.5 holds {under_half_second} of {count}, but the 504 took ~1 s"
    assert total_count == sum(s.series("platform_proxy_requests_total").values())


def test_credentials_injected_and_stripped_are_counted_per_route(metered, prom_parser):
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser, requests_match)
    # api: 3 echo + 2 status + 1 redirect; down and short: one attempt each; none routes inject nothing
    assert s.get("platform_proxy_credentials_injected_total", route="api") == 6, s.text
    assert s.get("platform_proxy_credentials_injected_total", route="down") == 1, s.text
    assert s.get("platform_proxy_credentials_injected_total", route="short") == 1, s.text
    assert s.get("platform_proxy_credentials_injected_total", route="open") == 0, s.text
    assert s.get("platform_proxy_credentials_injected_total", route="rec") == 0, s.text
    assert s.get("platform_proxy_credentials_stripped_total", route="api") == 1, s.text
    assert sum(s.series("platform_proxy_credentials_stripped_total").values()) == 1, s.text


def test_same_host_redirect_strips_nothing(metered, prom_parser):
    to = metered.main.url("/base/after")
    assert metered.get(f"/api/redirect?status=302&to={q(to)}").status == 200
    s = scrape_until(metered, prom_parser,
                     lambda s: s.get("platform_proxy_requests_total", route="api", status="200") == 1)
    assert s.get("platform_proxy_credentials_injected_total", route="api") == 1, s.text
    assert sum(s.series("platform_proxy_credentials_stripped_total").values()) == 0, s.text


def test_upstream_errors_are_counted_by_route_and_kind(metered, prom_parser):
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser, requests_match)
    assert s.get("platform_proxy_upstream_errors_total", route="down", kind="unreachable") == 1, s.text
    assert s.get("platform_proxy_upstream_errors_total", route="short", kind="timeout") == 1, s.text
    assert sum(s.series("platform_proxy_upstream_errors_total").values()) == 2, \
        f"upstream 404s and redirects are not upstream errors:\n{s.text}"


def test_mock_recorded_is_counted(metered, prom_parser):
    drive_known_traffic(metered)
    s = scrape_until(metered, prom_parser,
                     lambda s: s.get("platform_proxy_mock_recorded_total", route="rec") == 2)
    assert s.get("platform_proxy_mock_recorded_total", route="rec") == 2, s.text
    # a path already recorded is not written (nor counted) again
    assert metered.get("/rec/one").status == 200
    s = scrape_until(metered, prom_parser,
                     lambda s: s.get("platform_proxy_requests_total", route="rec", status="200") == 3)
    assert s.get("platform_proxy_mock_recorded_total", route="rec") == 2, s.text


def test_config_reloads_are_counted_ok_and_failed(metered, prom_parser):
    good = metered.config_path.read_text()
    metered.signal(signal.SIGHUP)
    s = scrape_until(metered, prom_parser, lambda s: s.get("platform_proxy_config_reloads_total", result="ok") == 1)
    assert s.get("platform_proxy_config_reloads_total", result="ok") == 1, s.text
    metered.config_path.write_text(json.dumps({"listen": ["127.0.0.1:0"], "routes": [{"name": "x"}], "bogus": 1}))
    metered.signal(signal.SIGHUP)
    s = scrape_until(metered, prom_parser,
                     lambda s: s.get("platform_proxy_config_reloads_total", result="failed") == 1)
    assert s.get("platform_proxy_config_reloads_total", result="failed") == 1, s.text
    assert s.get("platform_proxy_config_reloads_total", result="ok") == 1, s.text
    metered.config_path.write_text(good)
    metered.signal(signal.SIGHUP)
    s = scrape_until(metered, prom_parser, lambda s: s.get("platform_proxy_config_reloads_total", result="ok") == 2)
    assert s.get("platform_proxy_config_reloads_total", result="ok") == 2, s.text
    assert s.get("platform_proxy_config_reloads_total", result="failed") == 1, s.text


def test_counters_survive_a_config_reload(metered, prom_parser):
    drive_known_traffic(metered)
    scrape_until(metered, prom_parser, requests_match)
    metered.signal(signal.SIGHUP)
    s = scrape_until(metered, prom_parser, lambda s: s.get("platform_proxy_config_reloads_total", result="ok") == 1)
    for (route, status), n in EXPECTED_REQUESTS.items():
        assert s.get("platform_proxy_requests_total", route=route, status=status) == n, s.text


# --------------------------------------------------------------------------- open connections


def test_open_connections_gauge_counts_idle_keepalive_connections(metered, prom_parser):
    n_served, n_bare = 12, 8
    socks = []
    try:
        for i in range(n_served):
            s = metered.connect()
            s.sendall(build_request("GET", f"/open/echo?i={i}", {"Host": metered.host_header}))
            r = ResponseReader(s).read_response()
            assert r.status == 200 and not r.wants_close, str(r)
            socks.append(s)
        for _ in range(n_bare):
            socks.append(metered.connect())  # accepted, no request yet: idle too
        n = n_served + n_bare
        s = scrape_until(metered, prom_parser, lambda s: s.get("platform_proxy_open_connections") >= n)
        got = s.get("platform_proxy_open_connections")
        assert got >= n, f"open_connections {got} with {n} idle connections open\n{s.text}"
        assert got <= n + 3, f"open_connections {got}, but only {n} (+ the scrape) are open"
    finally:
        for s in socks:
            s.close()
    s = scrape_until(metered, prom_parser, lambda s: s.get("platform_proxy_open_connections") <= 2)
    assert s.get("platform_proxy_open_connections") <= 2, \
        f"all {n_served + n_bare} connections closed, gauge still {s.get('platform_proxy_open_connections')}"
