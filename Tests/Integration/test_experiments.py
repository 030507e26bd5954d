"""A/B experiments (docs/experiments.md) through the real binary.

Assignments are checked against an independent Python implementation of GrowthBook's
version-2 hash and bucket ranges; exposures are checked where they end up, at the
recording analytics endpoint (``analytics_sink.AnalyticsSink``); the ``X-Experiments``
header is checked at the recording upstream (``upstream.Upstream``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from analytics_sink import AnalyticsSink
from proxy import base_config, run_cli
from test_analytics import analytics_block, make_tokens, wait_until
from test_forwarding import static_provider
from test_reload import reload_with, wait_for_event
from upstream import Upstream

ROOT = "pennmobile"
PENNKEY = "jdoe"

EXPERIMENTS = {
    "onboarding-v2": {"variants": {"control": 50, "new": 50}, "salt": "2026-11", "enabled": True,
                      "start": "2020-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"},
    "layout": {"variants": {"list": 20, "grid": 30, "cards": 50}},
    "retired": {"variants": {"old": 1, "new": 1}, "end": "2021-01-01T00:00:00+01:00"},
    "paused": {"variants": {"off": 1, "on": 3}, "enabled": False},
}
RUNNING = ("onboarding-v2", "layout")


# --------------------------------------------------------------------------- GrowthBook, independently


def fnv1a32(text: str) -> int:
    h = 0x811C9DC5
    for unit in text.encode("utf-16-le")[::2]:  # ASCII subjects: one code unit per byte
        h ^= unit
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def gb_hash(seed: str, value: str) -> float:
    return (fnv1a32(str(fnv1a32(seed + value))) % 10000) / 10000


def expected_variant(name: str, spec: dict, subject: str) -> str:
    variants = list(spec["variants"].items())
    running = spec.get("enabled", True) and not spec.get("end", "").startswith("2021")  # "retired" ended in 2020
    if not running:
        return variants[0][0]
    total = sum(w for _, w in variants)
    seed = f"{spec['salt']}:{name}" if spec.get("salt") else name
    n = gb_hash(seed, subject)
    start = 0.0
    for variant, weight in variants:
        end = start + weight / total
        if start <= n < end:
            return variant
        start = end
    return variants[0][0]


def expected_all(subject: str) -> dict:
    return {name: expected_variant(name, spec, subject) for name, spec in EXPERIMENTS.items()}


# --------------------------------------------------------------------------- helpers


def experiments_config(tmp_path: Path, *, tokens=None, sink: AnalyticsSink | None = None, routes=None, **extra) -> dict:
    state = tmp_path / "state"
    state.mkdir(parents=True, exist_ok=True)
    cfg = base_config(None, stateDirectory=str(state), experiments=EXPERIMENTS, **extra)
    if tokens is not None:
        cfg["provider"] = static_provider(tokens)
    if sink is not None:
        cfg["analytics"] = analytics_block(sink)
    if routes is not None:
        cfg["routes"] = routes
    return cfg


def get_json(server, path: str, **kw):
    r = server.get(path, **kw)
    return r, (r.json() if r.body else None)


def wait_subject(server, subject: str) -> None:
    wait_until(lambda: server.get("/_platform/auth").json().get("subject") == subject, what=f"subject {subject}")


def flush(server) -> dict:
    r = server.request("POST", "/_platform/analytics/flush", body=b"{}")
    assert r.status == 200, r
    return r.json()


def metric_lines(server, name: str) -> dict:
    text = server.get("/_platform/metrics").body.decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            out[labels[len(name):]] = float(value)
    return out


@pytest.fixture
def sink():
    s = AnalyticsSink().start()
    yield s
    s.stop()


@pytest.fixture
def upstream():
    with Upstream("app") as u:
        yield u


# --------------------------------------------------------------------------- assignment


def test_logged_in_assignments_follow_growthbook_hash_and_survive_restart(start_proxy, tmp_path):
    tokens = make_tokens(tmp_path / "tokens", pennkey=PENNKEY)
    config = experiments_config(tmp_path, tokens=tokens)
    server = start_proxy(config=config, name="first")
    wait_subject(server, PENNKEY)
    r, body = get_json(server, "/_platform/experiments")
    assert r.status == 200 and r.header("content-type") == "application/json", r
    assert list(body) == list(EXPERIMENTS), "config order"
    assert body == expected_all(PENNKEY)
    assert body["retired"] == "old" and body["paused"] == "off", "inactive experiments give the first variant"

    r, one = get_json(server, "/_platform/experiments/layout")
    assert r.status == 200, r
    assert one == {"experiment": "layout", "variant": body["layout"], "reason": "assigned", "variants": ["list", "grid", "cards"]}
    assert server.get("/_platform/experiments/retired").json()["reason"] == "inactive"

    server.stop()
    again = start_proxy(config=config, name="second")
    wait_subject(again, PENNKEY)
    assert again.get("/_platform/experiments").json() == body


def test_logged_out_subject_is_a_persisted_installation_id(start_proxy, tmp_path):
    config = experiments_config(tmp_path)
    server = start_proxy(config=config, name="first")
    id_file = tmp_path / "state" / "installation-id"
    assert stat.S_IMODE(os.stat(id_file).st_mode) == 0o600
    installation = id_file.read_text().strip()
    assert len(installation) >= 16
    body = server.get("/_platform/experiments").json()
    assert body == expected_all(installation)

    server.stop()
    again = start_proxy(config=config, name="second")
    assert id_file.read_text().strip() == installation
    assert again.get("/_platform/experiments").json() == body


def test_no_experiments_configured_means_an_empty_list_and_no_state_files(start_proxy, tmp_path):
    state = tmp_path / "state"
    server = start_proxy(config=base_config(None, stateDirectory=str(state)))
    assert server.get("/_platform/experiments").json() == {}
    r = server.get("/_platform/experiments/onboarding-v2")
    assert r.status == 404 and r.json()["error"] == "unknown_experiment", r
    assert not (state / "installation-id").exists()


def test_reload_adds_experiments_and_a_weight_change_applies_to_new_reads(start_proxy, tmp_path):
    state = tmp_path / "state"
    server = start_proxy(config=base_config(None, stateDirectory=str(state)))
    assert server.get("/_platform/experiments").json() == {}
    config = dict(server.config, experiments={"solo": {"variants": {"a": 1, "b": 0}}})
    reload_with(server, config)
    wait_for_event(server, "config_reloaded")
    installation = (state / "installation-id").read_text().strip()
    assert server.get("/_platform/experiments").json() == {"solo": "a"}
    reload_with(server, dict(config, experiments={"solo": {"variants": {"a": 0, "b": 1}}}))
    wait_for_event(server, "config_reloaded", count=2)
    assert server.get("/_platform/experiments").json() == {"solo": "b"}
    assert (state / "installation-id").read_text().strip() == installation


# --------------------------------------------------------------------------- overrides


def test_overrides_set_clear_persist_and_refuse_unknown_names(start_proxy, tmp_path):
    tokens = make_tokens(tmp_path / "tokens", pennkey=PENNKEY)
    config = experiments_config(tmp_path, tokens=tokens)
    server = start_proxy(config=config, name="first")
    wait_subject(server, PENNKEY)
    hashed = expected_all(PENNKEY)["onboarding-v2"]
    forced = "new" if hashed == "control" else "control"

    r = server.request("PUT", "/_platform/experiments/onboarding-v2", body=json.dumps({"variant": forced}).encode())
    assert r.status == 200, r
    assert r.json() == {"experiment": "onboarding-v2", "variant": forced, "reason": "override", "variants": ["control", "new"]}
    assert server.get("/_platform/experiments").json()["onboarding-v2"] == forced
    # An override also forces an experiment that is not running.
    assert server.request("PUT", "/_platform/experiments/paused", body=b'{"variant": "on"}').status == 200
    assert server.get("/_platform/experiments/paused").json()["variant"] == "on"

    r = server.request("PUT", "/_platform/experiments/onboarding-v2", body=b'{"variant": "blue"}')
    assert r.status == 400, r
    err = r.json()
    assert set(err) == {"error", "message", "requestID"} and err["error"] == "unknown_variant", err
    assert "control, new" in err["message"]
    r = server.request("PUT", "/_platform/experiments/nope", body=b'{"variant": "a"}')
    assert r.status == 404 and r.json()["error"] == "unknown_experiment", r
    assert server.get("/_platform/experiments/nope").status == 404
    r = server.request("PUT", "/_platform/experiments/onboarding-v2", body=b"not json")
    assert r.status == 400 and r.json()["error"] == "invalid_request", r
    r = server.request("POST", "/_platform/experiments/onboarding-v2", body=b"{}")
    assert r.status == 405 and r.header("allow") == "GET, PUT, DELETE", r
    r = server.request("PUT", "/_platform/experiments", body=b"{}")
    assert r.status == 405 and r.header("allow") == "GET", r

    state_file = tmp_path / "state" / "experiments.json"
    wait_until(lambda: state_file.exists() and json.loads(state_file.read_text())["overrides"].get("paused") == "on",
               what="overrides written")
    assert stat.S_IMODE(os.stat(state_file).st_mode) == 0o600

    server.stop()
    again = start_proxy(config=config, name="second")
    wait_subject(again, PENNKEY)
    assert again.get("/_platform/experiments/onboarding-v2").json()["variant"] == forced
    r = again.request("DELETE", "/_platform/experiments/onboarding-v2")
    assert r.status == 200 and r.json()["variant"] == hashed and r.json()["reason"] == "assigned", r
    assert again.get("/_platform/experiments").json()["onboarding-v2"] == hashed


def test_experiment_endpoints_keep_the_local_security_checks(start_proxy, tmp_path):
    config = experiments_config(tmp_path, apiKey="k-123")
    server = start_proxy(config=config)
    r = server.get("/_platform/experiments")
    assert r.status == 401 and r.json()["error"] == "proxy_key_required", r
    r = server.get("/_platform/experiments", headers={"X-Proxy-Key": "k-123", "Origin": "https://evil.example"})
    assert r.status == 403 and r.json()["error"] == "origin_not_allowed", r
    r = server.request("PUT", "/_platform/experiments/layout", headers={"X-Proxy-Key": "k-123", "Host": "evil.example"},
                       body=b'{"variant": "grid"}')
    assert r.status == 403 and r.json()["error"] == "host_not_allowed", r
    assert server.get("/_platform/experiments", headers={"X-Proxy-Key": "k-123"}).status == 200


# --------------------------------------------------------------------------- exposures


def test_exposure_recorded_once_per_day_and_uploaded_in_the_platform_shape(start_proxy, sink, tmp_path):
    tokens = make_tokens(tmp_path / "tokens", pennkey=PENNKEY)
    config = experiments_config(tmp_path, tokens=tokens, sink=sink)
    server = start_proxy(config=config, name="first")
    wait_subject(server, PENNKEY)
    assert server.request("PUT", "/_platform/experiments/layout", body=b'{"variant": "grid"}').status == 200

    t0 = int(time.time())
    body = server.get("/_platform/experiments").json()
    for _ in range(3):
        assert server.get("/_platform/experiments").json() == body
        assert server.get("/_platform/experiments/onboarding-v2").json()["variant"] == body["onboarding-v2"]
    report = flush(server)
    assert report["sent"] == 1 and report["remaining"] == 0, report
    uploads = sink.snapshot()
    assert len(uploads) == 1, [u.raw for u in uploads]
    u = uploads[0]
    assert set(u.body) == {"product", "pennkey", "timestamp", "data"}, u.raw
    assert u.body["product"] == 1 and u.body["pennkey"] == PENNKEY
    assert t0 <= u.body["timestamp"] <= time.time() + 1
    # Only the running, hashed assignment: the override (layout) and the inactive ones record nothing.
    assert u.body["data"] == [{"key": f"{ROOT}.experiment.onboarding-v2.{body['onboarding-v2']}", "value": "1"}]
    assert u.header("authorization") == f"Bearer {tokens.access}"

    exposures = metric_lines(server, "platform_proxy_experiment_exposures_total")
    assert exposures == {f'{{experiment="onboarding-v2",variant="{body["onboarding-v2"]}"}}': 1}, exposures
    assignments = metric_lines(server, "platform_proxy_experiment_assignments_total")
    assert assignments[f'{{experiment="onboarding-v2",variant="{body["onboarding-v2"]}"}}'] == 7
    assert assignments['{experiment="layout",variant="grid"}'] == 4

    # Once per day: a restart remembers today's exposures.
    server.stop()
    again = start_proxy(config=config, name="second")
    wait_subject(again, PENNKEY)
    assert again.get("/_platform/experiments").json() == body
    assert flush(again)["sent"] == 0
    assert len(sink.snapshot()) == 1

    # Another subject is exposed on its own first read.
    tokens.write_id(sub="user-2", pennkey="other", exp=int(time.time()) + 86400)
    wait_subject(again, "other")
    other = again.get("/_platform/experiments").json()
    assert other["onboarding-v2"] == expected_variant("onboarding-v2", EXPERIMENTS["onboarding-v2"], "other")
    assert flush(again)["sent"] == 1
    last = sink.snapshot()[-1]
    assert last.body["pennkey"] == "other"
    assert last.body["data"] == [{"key": f"{ROOT}.experiment.onboarding-v2.{other['onboarding-v2']}", "value": "1"}]


def test_logged_out_reads_record_no_exposure(start_proxy, sink, tmp_path):
    dead = "http://127.0.0.1:9/"  # discard port: never contacted without a login
    provider = {"grant": "authorization_code", "clientID": "app", "authorizationEndpoint": dead + "authorize",
                "tokenEndpoint": dead + "token", "redirectURI": "http://127.0.0.1:8080/_platform/callback"}
    config = experiments_config(tmp_path, sink=sink, provider=provider)
    server = start_proxy(config=config)
    assert server.get("/_platform/auth").json()["loggedIn"] is False
    installation = (tmp_path / "state" / "installation-id").read_text().strip()
    assert server.get("/_platform/experiments").json() == expected_all(installation)
    assert server.get("/_platform/experiments/layout").status == 200
    assert flush(server)["sent"] == 0
    assert sink.snapshot() == []
    assert metric_lines(server, "platform_proxy_experiment_exposures_total") == {}


# --------------------------------------------------------------------------- X-Experiments upstream


def test_header_on_routes_that_ask_replacing_the_clients_and_not_on_others(start_proxy, upstream, tmp_path):
    tokens = make_tokens(tmp_path / "tokens", pennkey=PENNKEY)
    routes = [{"name": "exp", "path": "/exp/", "upstream": upstream.url("/"), "experimentHeader": True},
              {"name": "plain", "path": "/plain/", "upstream": upstream.url("/")}]
    server = start_proxy(config=experiments_config(tmp_path, tokens=tokens, routes=routes))
    wait_subject(server, PENNKEY)
    expected = expected_all(PENNKEY)
    header = "; ".join(f"{k}={v}" for k, v in expected.items())

    assert server.get("/exp/a", headers={"X-Experiments": "onboarding-v2=forged", "x-experiments": "more"}).status == 200
    assert server.get("/plain/b", headers={"X-Experiments": "client-own=1"}).status == 200
    assert server.get("/plain/c").status == 200
    recs = {r.path: r for r in upstream.records}
    assert recs["/a"].header_all("X-Experiments") == [header], str(recs["/a"])
    assert recs["/b"].header_all("X-Experiments") == ["client-own=1"], "other routes pass the client's header untouched"
    assert recs["/c"].header_all("X-Experiments") == []

    # The cached line follows an override at once, and a new subject.
    assert server.request("PUT", "/_platform/experiments/layout", body=b'{"variant": "cards"}').status == 200
    assert server.get("/exp/d").status == 200
    tokens.write_id(sub="user-2", pennkey="other", exp=int(time.time()) + 86400)
    wait_subject(server, "other")
    assert server.get("/exp/e").status == 200
    recs = {r.path: r for r in upstream.records}
    assert recs["/d"].header("X-Experiments") == header.replace(f"layout={expected['layout']}", "layout=cards")
    other = expected_all("other")
    other["layout"] = "cards"
    assert recs["/e"].header("X-Experiments") == "; ".join(f"{k}={v}" for k, v in other.items())


def test_check_config_reports_experiment_errors_with_json_paths(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"experiments": {"a": {"variants": {"x": 0}, "start": "soon", "colour": 1}}}))
    r = run_cli("check-config", "--config", str(path))
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "experiments.a.colour: unknown key" in out
    assert "experiments.a.variants: at least one weight must be above 0" in out
    assert "experiments.a.start: expected an ISO 8601 date-time" in out
