"""Profiles (JSON Merge Patches over the base config) through the real binary: selection by
--profile or PLATFORM_PROXY_PROFILE, the test and release conventions, check-config over every
profile, the active profile on health, metrics and status, and reload re-reading the profile."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from proxy import ProxyProcess, base_config, require_binary, wait_until, write_mock_dir


def profiled_config(tmp_path, **profiles) -> dict:
    mock = write_mock_dir(tmp_path / "mock", {"a": {"from": "mock"}})
    config = base_config(routes=[{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/",
                                  "credential": "none", "mock": {"directory": str(mock), "mode": "off"}}],
                         analytics={"root": "app", "endpoint": "http://127.0.0.1:9/analytics/", "credential": "none"})
    config["profiles"] = profiles or {"test": {}, "release": {}}
    return config


def serve(tmp_path, config: dict, *args: str, env: dict | None = None) -> ProxyProcess:
    server = ProxyProcess(config, tmp_path / "run")
    server.workdir.mkdir(parents=True, exist_ok=True)
    server.config_path.write_text(json.dumps(config))
    with open(server.log_path, "wb") as log:
        server.proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(server.config_path), *args],
                                       stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                       env={**os.environ, **(env or {})})
    server._wait_for_listening()
    return server


def cli(*args: str, env: dict | None = None):
    return subprocess.run([str(require_binary()), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **(env or {})})


def test_the_test_profile_turns_mocks_on_and_uploads_off_and_says_so(tmp_path):
    server = serve(tmp_path, profiled_config(tmp_path), "--profile", "test")
    try:
        assert server.get("/api/a").json() == {"from": "mock"}
        assert server.get("/_platform/health").json() == {"status": "ok", "profile": "test"}
        metrics = server.get("/_platform/metrics").body.decode()
        assert 'platform_proxy_build_info{version="' in metrics and 'profile="test"} 1' in metrics, metrics
        flush = server.request("POST", "/_platform/analytics/flush").json()
        assert flush["sent"] == 0 and "uploads are off" in flush["deferred"], flush
        status_config = dict(server.config, listen=[server.address])
        status_path = tmp_path / "status.json"
        status_path.write_text(json.dumps(status_config))
        out = cli("status", "--config", str(status_path), "--profile", "test")
        assert "profile: test" in out.stdout, out.stdout + out.stderr
    finally:
        assert server.stop() == 0


def test_the_environment_variable_selects_a_profile_and_the_base_runs_without_one(tmp_path):
    config = profiled_config(tmp_path, test={}, quiet={"mock": True})
    server = serve(tmp_path, config, env={"PLATFORM_PROXY_PROFILE": "quiet"})
    try:
        assert server.get("/_platform/health").json() == {"status": "ok", "profile": "quiet"}
        assert server.get("/api/a").json() == {"from": "mock"}
    finally:
        assert server.stop() == 0
    base = serve(tmp_path / "base", config, env={"PLATFORM_PROXY_PROFILE": ""})
    try:
        assert base.get("/_platform/health").json() == {"status": "ok"}
        assert base.get("/api/a").status == 502  # the real (unreachable) upstream: mocks are off
    finally:
        assert base.stop() == 0


def test_release_refuses_mock_data_and_check_config_names_the_profile(tmp_path):
    config = profiled_config(tmp_path, test={}, release={})
    config["routes"][0]["mock"]["mode"] = "replay"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    report = cli("check-config", "--config", str(path))
    assert report.returncode == 1
    lines = report.stdout.splitlines()
    assert lines[0] == f"{path}: ok (1 route)", report.stdout
    assert lines[1] == f"{path} [profile test]: ok (1 route)", report.stdout
    assert lines[2] == f"{path} [profile release]: 1 problem", report.stdout
    assert lines[3].startswith("  profile release: routes[0].mock: mode \"replay\": mock data never ships"), report.stdout
    only = cli("check-config", "--config", str(path), "--profile", "test")
    assert only.returncode == 0 and "[profile release]" not in only.stdout
    refused = subprocess.run([str(require_binary()), "serve", "--config", str(path), "--profile", "release"],
                             capture_output=True, text=True, timeout=15)
    assert refused.returncode == 1
    errors = [json.loads(line) for line in refused.stderr.splitlines() if '"config_error"' in line]
    assert [e["path"] for e in errors] == ["routes[0].mock"], refused.stderr


def test_reload_rereads_the_active_profile(tmp_path):
    config = profiled_config(tmp_path, test={}, staging={"mock": False})
    server = serve(tmp_path, config, "--profile", "staging")
    try:
        assert server.get("/api/a").status == 502
        config["profiles"]["staging"] = {"mock": True}
        server.config_path.write_text(json.dumps(config))
        server.signal(signal.SIGHUP)
        assert wait_until(lambda: server.log_events("config_reloaded"), 5), server.stderr_text()
        assert server.get("/api/a").json() == {"from": "mock"}
        assert server.get("/_platform/health").json()["profile"] == "staging"
    finally:
        assert server.stop() == 0
