"""Running it as an operator does: the command line, the config lookup, check-config's report,
probes and the metrics listener, reload without signals, the shutdown grace, and the messages
a container user sees. Everything through the real binary."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from proxy import REPO_ROOT, ProxyProcess, base_config, require_binary, run_cli, wait_until, write_mock_dir

STATIC_TOKEN = "ops-test-token-0123456789"


def cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 30.0):
    return subprocess.run([str(require_binary()), *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout, stdin=subprocess.DEVNULL)


def write_config(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


def static_provider(folder: Path, **extra) -> dict:
    token = folder / "token.txt"
    token.write_text(STATIC_TOKEN + "\n")
    return {"grant": "static", "accessToken": {"file": str(token)}, **extra}


# ------------------------------------------------------------------------ command line


def test_usage_error_is_one_line_with_a_hint():
    for args in (["srve"], ["serve", "--confg", "x"], ["--config"], ["status", "extra"], []):
        r = cli(*args)
        assert r.returncode == 2, (args, r)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 2, f"{args}: expected one line and a hint, got:\n{r.stderr}"
        assert lines[1] == "Run 'platform-proxy help' for the commands and options.", r.stderr
        assert "Usage:" not in r.stderr


@pytest.mark.parametrize("args", [["help", "check-config"], ["check-config", "--help"], ["check-config", "-h"]])
def test_help_for_one_command(args):
    r = cli(*args)
    assert r.returncode == 0, r
    assert r.stdout.startswith("platform-proxy check-config"), r.stdout
    assert "--schema-only" in r.stdout


def test_help_lists_every_command_and_the_config_lookup():
    r = cli("help")
    assert r.returncode == 0
    for command in ("serve", "check-config", "login", "status", "logout", "help"):
        assert f"platform-proxy {command}" in r.stdout
    assert "PLATFORM_PROXY_CONFIG" in r.stdout and "/etc/platform-proxy/config.json" in r.stdout


def test_config_option_accepts_the_equals_form(tmp_path):
    path = write_config(tmp_path / "c.json", base_config())
    r = cli("check-config", f"--config={path}")
    assert r.returncode == 0 and f"{path}: ok" in r.stdout, r


def test_config_is_looked_up_in_order_and_the_choice_is_named(tmp_path):
    """--config, then $PLATFORM_PROXY_CONFIG, then ./Config/platform-proxy.json; never the cwd's guess silently."""
    env_config = write_config(tmp_path / "env" / "from-env.json", base_config())
    cwd_config = write_config(tmp_path / "work" / "Config" / "platform-proxy.json", base_config(routes=[]))
    explicit = write_config(tmp_path / "explicit.json", base_config())
    no_env = {"PLATFORM_PROXY_CONFIG": ""}

    r = cli("check-config", cwd=tmp_path / "work", env=no_env)
    assert r.returncode == 0, r
    assert "using Config/platform-proxy.json (found in the default places)" in r.stdout, r.stdout

    r = cli("check-config", cwd=tmp_path / "work", env={"PLATFORM_PROXY_CONFIG": str(env_config)})
    assert f"using {env_config} (from PLATFORM_PROXY_CONFIG)" in r.stdout, r.stdout

    r = cli("check-config", "--config", str(explicit), cwd=tmp_path / "work",
            env={"PLATFORM_PROXY_CONFIG": str(env_config)})
    assert f"{explicit}: ok" in r.stdout and "using" not in r.stdout, r.stdout
    assert cwd_config.exists()

    if not Path("/etc/platform-proxy/config.json").exists():
        r = cli("check-config", cwd=tmp_path, env=no_env)  # no Config/ here
        assert r.returncode == 2, r
        assert "give --config FILE or set PLATFORM_PROXY_CONFIG" in r.stderr, r.stderr
        assert "./Config/platform-proxy.json" in r.stderr and "/etc/platform-proxy/config.json" in r.stderr


# ----------------------------------------------------------------------- check-config


def test_check_config_report_goes_to_stdout_so_it_can_be_redirected(tmp_path):
    bad = write_config(tmp_path / "bad.json", {"listen": ["127.0.0.1:0"], "routez": []})
    r = cli("check-config", "--config", str(bad))
    assert r.returncode == 1
    assert "routez" in r.stdout and r.stderr == "", (r.stdout, r.stderr)


def test_schema_only_checks_the_shape_without_reading_secrets(tmp_path):
    config = base_config(provider={"grant": "static", "accessToken": {"file": str(tmp_path / "missing-token")},
                                   "idToken": {"env": "PLATFORM_PROXY_TEST_UNSET_VARIABLE"}},
                         routes=[{"name": "api", "path": "/api/", "upstream": "http://127.0.0.1:9/",
                                  "credential": "access_token"}])
    path = write_config(tmp_path / "c.json", config)
    full = cli("check-config", "--config", str(path))
    assert full.returncode == 1 and "missing-token" in full.stdout, full
    schema = cli("check-config", "--schema-only", "--config", str(path))
    assert schema.returncode == 0, schema
    assert "secrets not read" in schema.stdout
    config["routes"][0]["credential"] = "sometimes"
    write_config(path, config)
    assert cli("check-config", "--schema-only", "--config", str(path)).returncode == 1


def test_ignored_and_risky_settings_are_warnings_with_exit_0(tmp_path):
    provider = static_provider(tmp_path, demo={"accessToken": "demo", "expiresInSeconds": 60})
    config = base_config(provider=provider, listen=["0.0.0.0:0"])
    r = cli("check-config", "--config", str(write_config(tmp_path / "c.json", config)))
    assert r.returncode == 0, r
    assert re.search(r"warning: provider\.demo: ignored with grant \"static\"", r.stdout), r.stdout
    assert re.search(r"warning: listen\[0\]: 0\.0\.0\.0:0 accepts connections from other machines and no apiKey", r.stdout)

    placeholder = base_config(provider={"grant": "authorization_code", "clientID": "REPLACE_WITH_YOUR_CLIENT_ID",
                                        "authorizationEndpoint": "https://idp.test/authorize",
                                        "tokenEndpoint": "https://idp.test/token",
                                        "redirectURI": "http://127.0.0.1:8080/_platform/callback"})
    r = cli("check-config", "--config", str(write_config(tmp_path / "p.json", placeholder)))
    assert r.returncode == 0 and "warning: provider.clientID" in r.stdout and "placeholder" in r.stdout, r.stdout

    keyed = base_config(listen=["0.0.0.0:0"], apiKey="k" * 24)
    r = cli("check-config", "--config", str(write_config(tmp_path / "k.json", keyed)))
    assert r.returncode == 0 and "warning" not in r.stdout, r.stdout


def test_shipped_configs_pass_check_config_out_of_the_box():
    """`make check-config`: the default config as is, the examples and images without their secrets."""
    r = cli("check-config", "--config", str(REPO_ROOT / "Config" / "platform-proxy.json"))
    assert r.returncode == 0 and "warning" not in r.stdout, r.stdout  # no dead settings in the default
    for path in sorted((REPO_ROOT / "Config" / "examples").glob("*.json")) + sorted((REPO_ROOT / "Docker").glob("*.json")):
        r = cli("check-config", "--schema-only", "--config", str(path))
        assert r.returncode == 0, f"{path.name}:\n{r.stdout}{r.stderr}"
        assert "accepts connections from other machines" not in r.stdout, f"{path.name} exposes the proxy:\n{r.stdout}"


def test_serve_reports_an_invalid_config_as_json_lines(tmp_path):
    path = write_config(tmp_path / "bad.json", {"listen": ["127.0.0.1:0"], "routes": [], "bogusKey": 1, "workers": "x"})
    r = cli("serve", "--config", str(path), timeout=10)
    assert r.returncode == 1
    lines = [json.loads(line) for line in r.stderr.splitlines() if line.strip()]  # every line is JSON
    errors = [e for e in lines if e["event"] == "config_error"]
    assert {e["path"] for e in errors} >= {"bogusKey", "workers"}, lines
    assert all(e["message"] for e in errors)
    assert lines[-1]["event"] == "startup_failed" and "check-config" in lines[-1]["hint"], lines[-1]


def test_check_config_refuses_a_static_token_that_cannot_be_sent_in_a_header(tmp_path):
    """A CR/LF, space or NUL in a token would split or forge header lines: refused with the key
    and the offset, never the token itself."""
    token = tmp_path / "token.txt"
    token.write_bytes(b"tok-AAAA\r\nInjected: 1\n")
    for provider, offset in (({"grant": "static", "accessToken": {"file": str(token)}}, 8),
                             ({"grant": "static", "accessToken": "tok with-space"}, 3),
                             ({"grant": "static", "accessToken": "good-token", "idToken": "bad\u00e9token"}, 3)):
        r = cli("check-config", "--config", str(write_config(tmp_path / "c.json", base_config(provider=provider))))
        assert r.returncode == 1, r
        assert f"offset {offset}" in r.stdout and "visible ASCII" in r.stdout, r.stdout
        assert not any(secret in r.stdout for secret in ("Injected", "with-space", "bad\u00e9")), r.stdout


def test_a_rotated_static_token_that_cannot_be_sent_makes_ready_503_and_auth_say_why(start_proxy, tmp_path):
    server = start_proxy(config=base_config(provider=static_provider(tmp_path)))
    assert server.get("/_platform/ready").status == 200
    (tmp_path / "token.txt").write_bytes(b"tok-AAAA\r\nInjected: 1\n")

    def refused():
        r = server.get("/_platform/ready")
        return r.status == 503 and "cannot be sent in a header" in r.json()["reason"]
    assert wait_until(refused, 5), "ready still 200 with a token that cannot be sent"
    # the token watcher looks at the file about once a second
    assert wait_until(lambda: server.get("/_platform/auth").json()["state"] == "logged_out", 5)
    auth = server.get("/_platform/auth").json()
    assert "offset 8" in (auth["lastError"] or "") and "Injected" not in json.dumps(auth), auth
    assert server.get("/_platform/ready").status == 503
    (tmp_path / "token.txt").write_text(STATIC_TOKEN + "\n")
    assert wait_until(lambda: server.get("/_platform/ready").status == 200, 5), "not ready again after the fix"


@pytest.fixture
def nobody_path():
    """A fresh directory another user can reach (pytest's own tmp_path sits under a 0700 one)."""
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="platform-proxy-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the binary as another user")
def test_a_token_file_the_proxy_user_cannot_read_says_so(nobody_path):
    tmp_path = nobody_path
    token = tmp_path / "token.txt"
    token.write_text("secret-token\n")
    token.chmod(0o600)  # root's; the proxy runs as nobody below
    config = base_config(provider={"grant": "static", "accessToken": {"file": str(token)}})
    path = write_config(tmp_path / "c.json", config)
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    nobody = 65534
    r = subprocess.run([str(require_binary()), "check-config", "--config", str(path)], capture_output=True,
                       text=True, timeout=30, user=nobody, group=nobody)
    if "Permission denied" in r.stderr and "check-config" not in r.stdout and r.returncode not in (0, 1):
        pytest.skip(f"the binary is not executable by uid {nobody}: {r.stderr}")
    assert r.returncode == 1, r
    assert f"the proxy runs as uid {nobody}" in r.stdout and "chmod 0644" in r.stdout, r.stdout
    assert f"provider.accessToken: cannot read {token}" in r.stdout, r.stdout  # not the config file


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the binary as another user")
def test_an_analytics_store_the_proxy_user_cannot_create_names_the_directory_and_the_cause(nobody_path):
    """Was: SQLite's "unable to open database file", which
    says neither why nor where."""
    tmp_path = nobody_path
    state = tmp_path / "state"
    state.mkdir(mode=0o755)  # root's: nobody cannot create the database in it
    config = base_config(stateDirectory=str(state),
                         analytics={"root": "app", "endpoint": "http://127.0.0.1:9/analytics/", "credential": "none",
                                    "product": 1})
    path = write_config(tmp_path / "c.json", config)
    path.chmod(0o644)
    nobody = 65534
    r = subprocess.run([str(require_binary()), "serve", "--config", str(path)], capture_output=True, text=True,
                       timeout=30, user=nobody, group=nobody)
    if "Permission denied" in r.stderr and "startup_failed" not in r.stderr:
        pytest.skip(f"the binary is not executable by uid {nobody}: {r.stderr}")
    assert r.returncode == 1, r
    failed = [json.loads(line) for line in r.stderr.splitlines() if '"startup_failed"' in line]
    assert failed and f"creating files in {state} as uid {nobody} failed: Permission denied" in failed[-1].get("error", ""), r.stderr


# ------------------------------------------------------------------- status and login


def test_status_of_a_static_token_says_it_has_no_expiry(start_proxy, tmp_path):
    server = start_proxy(config=base_config(provider=static_provider(tmp_path)))
    r = cli("status", "--config", str(server.config_path))
    # the config's listen port is 0; status reaches the proxy through the address it logged
    config = dict(server.config, listen=[server.address])
    r = cli("status", "--config", str(write_config(tmp_path / "status.json", config)))
    assert r.returncode == 0, r
    assert "static token (no expiry" in r.stdout, r.stdout
    assert "min" not in r.stdout and STATIC_TOKEN not in r.stdout


# -------------------------------------------------------------------- probes, metrics


def http_get(url: str, headers: dict | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_probes_are_not_counted_as_requests_nor_logged_at_info(proxy):
    for _ in range(5):
        assert proxy.get("/_platform/health").status == 200
        assert proxy.get("/_platform/ready").status == 200
    assert proxy.get("/a").status == 200
    text = proxy.get("/_platform/metrics").body.decode()
    counted = [line for line in text.splitlines() if line.startswith("platform_proxy_requests_total{")]
    assert counted == ['platform_proxy_requests_total{route="root",status="200"} 1'], counted
    assert wait_until(lambda: any(e.get("path") == "/a" for e in proxy.log_events("request")), 5)
    logged = [e.get("path") for e in proxy.log_events("request")]
    assert "/_platform/health" not in logged and "/_platform/ready" not in logged, logged


def test_metrics_listener_serves_metrics_health_and_ready_only_without_host_or_key_checks(start_proxy, tmp_path):
    config = base_config(write_mock_dir(tmp_path / "mock", {"a": {"a": 1}}), apiKey="k" * 24,
                         metricsListen="127.0.0.1:0")
    server = start_proxy(config=config)
    wait_until(lambda: len(server.log_events("listening")) >= 2, 5)
    metrics_address = server.log_events("listening")[1]["address"]
    base = f"http://{metrics_address}"
    foreign = {"Host": "10.0.0.7:9090"}  # a scraper on the pod IP
    status, text = http_get(base + "/metrics", foreign)
    assert status == 200, text
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "process_start_time_seconds", "platform_proxy_build_info", "platform_proxy_config_last_reload_success"):
        assert re.search(rf"^{name}(\{{.*\}})? [0-9.e+]+$", text, re.M), f"{name} missing:\n{text}"
    rss = float(re.search(r"^process_resident_memory_bytes (\S+)$", text, re.M).group(1))
    assert 1e6 < rss < 2e9, rss
    start = float(re.search(r"^process_start_time_seconds (\S+)$", text, re.M).group(1))
    assert abs(start - time.time()) < 120, start
    assert http_get(base + "/_platform/health", foreign) == (200, '{"status":"ok"}')
    assert http_get(base + "/_platform/ready", foreign)[0] == 200
    status, body = http_get(base + "/a", foreign)
    assert status == 404 and json.loads(body)["error"] == "no_route", body
    # the main listener keeps every check
    assert server.get("/_platform/metrics").status == 401
    assert server.get("/a").status == 401


# ---------------------------------------------------------------- reload, shutdown


def test_config_file_change_reloads_without_a_signal(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"a": {"a": 1}})
    server = start_proxy(config=base_config(mock))
    assert server.get("/new/a").status == 404
    config = dict(server.config)
    config["routes"] = config["routes"] + [{"name": "new", "path": "/new/", "mock": {"directory": str(mock), "mode": "replay"}}]
    server.config_path.write_text(json.dumps(config))
    assert wait_until(lambda: server.log_events("config_reloaded"), 5), server.stderr_text()[-2000:]
    assert server.log_events("config_reloaded")[-1]["trigger"] == "file_changed"
    assert server.get("/new/a").status == 200
    # touching the file without changing it reloads nothing
    os.utime(server.config_path)
    time.sleep(1.0)
    assert len(server.log_events("config_reloaded")) == 1
    # an invalid edit is logged and the running config stays
    server.config_path.write_text('{"listen": ["127.0.0.1:0"], "routes": [], "typo": 1}')
    assert wait_until(lambda: server.log_events("config_reload_failed"), 5)
    assert server.get("/new/a").status == 200
    status, text = server.get("/_platform/metrics").status, server.get("/_platform/metrics").body.decode()
    assert "platform_proxy_config_last_reload_success 0" in text, text


def test_configmap_style_symlink_swap_reloads(start_proxy, tmp_path):
    """Kubernetes mounts a ConfigMap as dir/file -> ..data/file, and updates it by renaming ..data."""
    mock = write_mock_dir(tmp_path / "mock", {"a": {"a": 1}})
    mount = tmp_path / "mount"
    (mount / "v1").mkdir(parents=True)
    first = base_config(mock, listen=["127.0.0.1:0"])
    (mount / "v1" / "config.json").write_text(json.dumps(first))
    (mount / "..data").symlink_to("v1")
    (mount / "config.json").symlink_to("..data/config.json")
    server = ProxyProcess(first, tmp_path / "run")
    server.config_path = mount / "config.json"
    server.start = _start_with_existing_config.__get__(server)
    server.start()
    try:
        assert server.get("/other/a").status == 404
        second = dict(first, routes=first["routes"] + [{"name": "other", "path": "/other/",
                                                       "mock": {"directory": str(mock), "mode": "replay"}}])
        (mount / "v2").mkdir()
        (mount / "v2" / "config.json").write_text(json.dumps(second))
        (mount / "..data_tmp").symlink_to("v2")
        os.replace(mount / "..data_tmp", mount / "..data")  # the atomic swap kubelet does
        assert wait_until(lambda: server.log_events("config_reloaded"), 5), server.stderr_text()[-2000:]
        assert server.get("/other/a").status == 200
    finally:
        assert server.stop() == 0


def test_a_config_symlink_re_pointed_into_another_directory_keeps_being_watched_there(start_proxy, tmp_path):
    """Was: the watched directories were fixed at start, so
    after the link moved from v1/ to v2/, edits of v2/config.json were never seen."""
    mock = write_mock_dir(tmp_path / "mock", {"a": {"a": 1}})
    for version in ("v1", "v2", "live"):
        (tmp_path / version).mkdir()

    def config(routes: int) -> str:
        return _routes_config(mock, routes)
    (tmp_path / "v1" / "config.json").write_text(config(1))
    (tmp_path / "v2" / "config.json").write_text(config(2))
    link = tmp_path / "live" / "config.json"
    link.symlink_to(tmp_path / "v1" / "config.json")
    server = _serve_through(link, config(1), tmp_path / "run")
    try:
        (tmp_path / "live" / ".next").symlink_to(tmp_path / "v2" / "config.json")
        os.replace(tmp_path / "live" / ".next", link)
        assert wait_until(lambda: server.get("/r1/a").status == 200, 5), server.stderr_text()[-2000:]
        (tmp_path / "v2" / "config.json").write_text(config(3))  # edited in place, in the new directory
        assert wait_until(lambda: server.get("/r2/a").status == 200, 5), server.stderr_text()[-2000:]
        (tmp_path / "v1" / "config.json").write_text(config(5))  # the old target is no config any more
        time.sleep(1)
        assert server.get("/r4/a").status == 404
        assert len(server.log_events("config_reloaded")) == 2, server.log_events("config_reloaded")
    finally:
        assert server.stop() == 0


def test_a_link_re_pointed_in_the_middle_of_a_config_symlink_chain_reloads(start_proxy, tmp_path):
    """`live/config.json → current/config.json`, `current → releases/1`: re-pointing `current`
    changes no directory a watch covers. Was: never reloaded."""
    mock = write_mock_dir(tmp_path / "mock", {"a": {"a": 1}})

    def config(routes: int) -> str:
        return _routes_config(mock, routes)
    for release, routes in (("1", 1), ("2", 2)):
        (tmp_path / "releases" / release).mkdir(parents=True)
        (tmp_path / "releases" / release / "config.json").write_text(config(routes))
    (tmp_path / "current").symlink_to(tmp_path / "releases" / "1", target_is_directory=True)
    (tmp_path / "live").mkdir()
    link = tmp_path / "live" / "config.json"
    link.symlink_to(tmp_path / "current" / "config.json")
    server = _serve_through(link, config(1), tmp_path / "run")
    try:
        (tmp_path / "next").symlink_to(tmp_path / "releases" / "2", target_is_directory=True)
        os.replace(tmp_path / "next", tmp_path / "current")
        assert wait_until(lambda: server.get("/r1/a").status == 200, 5), server.stderr_text()[-2000:]
        (tmp_path / "releases" / "2" / "config.json").write_text(config(3))
        assert wait_until(lambda: server.get("/r2/a").status == 200, 5), server.stderr_text()[-2000:]
    finally:
        assert server.stop() == 0


def _routes_config(mock: Path, routes: int) -> str:
    """A config of `routes` mock routes `/r0/` … on an ephemeral port."""
    return json.dumps(base_config(None, listen=["127.0.0.1:0"], routes=[
        {"name": f"r{n}", "path": f"/r{n}/", "mock": {"directory": str(mock), "mode": "replay"}}
        for n in range(routes)]))


def _serve_through(link: Path, config: str, workdir: Path) -> ProxyProcess:
    """A proxy started on the config at `link` as it is (a symlink the test re-points)."""
    server = ProxyProcess(json.loads(config), workdir)
    server.config_path = link
    server.start = _start_with_existing_config.__get__(server)
    return server.start()


def _start_with_existing_config(self) -> ProxyProcess:
    """ProxyProcess.start without writing the config (it is a symlinked ConfigMap here)."""
    self.workdir.mkdir(parents=True, exist_ok=True)
    log = open(self.log_path, "wb")
    try:
        self.proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(self.config_path)],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.workdir)
    finally:
        log.close()
    self._wait_for_listening()
    return self


def test_shutdown_grace_seconds_bounds_the_drain(start_proxy, tmp_path):
    import socket
    server = start_proxy(config=base_config(write_mock_dir(tmp_path / "mock", {"a": {}}), shutdownGraceSeconds=1))
    # a client that sent half a request keeps an exchange open
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"POST /a HTTP/1.1\r\nHost: " + server.host_header.encode() + b"\r\nContent-Length: 10\r\n\r\nabc")
    time.sleep(0.2)
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    code = server.wait(timeout=8)
    took = time.monotonic() - started
    s.close()
    assert code == 0
    assert 0.8 <= took < 4, f"drain took {took:.1f}s with shutdownGraceSeconds 1"
    assert server.log_events("shutting_down")[-1]["deadlineSeconds"] == 1


def test_device_login_with_the_auth_server_down_says_what_happened(start_proxy, tmp_path):
    """Nobody is logged in, so there is no login to keep: the message must not claim one."""
    closed = "http://127.0.0.1:9"  # discard port: nothing listens
    provider = {"grant": "authorization_code", "clientID": "cli-test",
                "authorizationEndpoint": closed + "/authorize", "tokenEndpoint": closed + "/token",
                "deviceAuthorizationEndpoint": closed + "/device",
                "redirectURI": "http://127.0.0.1:8080/_platform/callback"}
    server = start_proxy(config=base_config(provider=provider, stateDirectory=str(tmp_path / "state")))
    r = server.request("POST", "/_platform/login/device")
    assert r.status == 503, r
    body = r.json()
    assert body["error"] == "auth_server_unavailable"
    assert "could not be reached to start the login" in body["message"], body
    assert "login is kept" not in body["message"]
    config = dict(server.config, listen=[server.address])
    out = cli("login", "--device", "--config", str(write_config(tmp_path / "cli.json", config)))
    assert out.returncode == 1, out
    assert "could not start (HTTP 503)" in out.stdout and "could not be reached to start the login" in out.stdout, out.stdout


def test_access_log_is_buffered_and_can_be_turned_off_without_losing_warnings(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"a": {"a": 1}})
    down = {"name": "down", "path": "/down/", "upstream": "http://127.0.0.1:9/", "credential": "none"}
    server = start_proxy(config=base_config(mock, routes=[
        {"name": "root", "path": "/", "mock": {"directory": str(mock), "mode": "replay"}}, down]))
    assert server.get("/a").status == 200
    # buffered like nginx's buffer=64k flush=1s: the line arrives within about a second
    assert wait_until(lambda: server.log_events("request"), 3), server.stderr_text()
    quiet = start_proxy(config=base_config(mock, log={"access": False}, routes=[
        {"name": "root", "path": "/", "mock": {"directory": str(mock), "mode": "replay"}}, down]), name="quiet")
    assert quiet.get("/a").status == 200
    assert quiet.get("/down/x").status == 502
    assert wait_until(lambda: quiet.log_events("upstream_failed"), 3), quiet.stderr_text()
    time.sleep(1.5)
    assert not quiet.log_events("request"), quiet.stderr_text()
    # lines still queued when the proxy stops are written, not lost
    assert server.get("/a", headers={"X-Request-ID": "last-before-stop"}).status == 200
    assert server.stop() == 0
    assert any(e.get("requestID") == "last-before-stop" for e in server.log_events("request")), server.stderr_text()[-1500:]
