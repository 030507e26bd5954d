"""The container image, built and run: Docker/Dockerfile, compose.yaml and kubernetes-sidecar.yaml
through a real engine (test_docker.py checks the same files without one).

The image is localhost/platform-proxy:latest from scripts/image.sh (`make image`), run once per
session here: with the engine's layer cache it takes seconds when the sources have not changed,
and it makes sure the image under test is the one these sources build. The engine is the one
scripts/container-engine.sh picks (docker when its daemon answers, else podman with this host's
containers.conf). Without any engine the tests are skipped with the reason, except in CI
(CI=true), where that is a failure.

Every container, pod and volume a test creates has a name starting with
`platform-proxy-test-` plus a random suffix and is removed by that name at teardown; nothing
else in the engine is touched. Containers that talk to processes of the test (an upstream, the
IdP) share the host's network and listen on a free loopback port; the image's own config
(0.0.0.0:8080) runs on the engine's network with the port published on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from credentials_support import CredProxy, browser_login, free_port, http_call, idp_factory, provider_for, routes_for  # noqa: E402,F401
from proxy import REPO_ROOT, wait_until  # noqa: E402

IMAGE = "localhost/platform-proxy:latest"
ENGINE_SCRIPT = REPO_ROOT / "scripts" / "container-engine.sh"
IMAGE_SCRIPT = REPO_ROOT / "scripts" / "image.sh"
IMAGE_LOG = REPO_ROOT / ".build-container" / "image-test.log"
K8S_FILE = REPO_ROOT / "Docker" / "kubernetes-sidecar.yaml"
COMPOSE_FILE = REPO_ROOT / "Docker" / "compose.yaml"

USER_ID = 10001                 # the Dockerfile's USER
MAX_IMAGE_MIB = 160
START_SECONDS = 10              # from `run` to /_platform/health answering 200
STOP_GRACE_SECONDS = 10         # Docker's default stop timeout; the proxy drains for at most 9 s
NAME_PREFIX = "platform-proxy-test-"
TOKEN = "container-test-token-not-a-secret"
API_KEY = "container-test-key-not-a-secret"
IN_CI = os.environ.get("CI") == "true"


def unique(kind: str) -> str:
    return f"{NAME_PREFIX}{kind}-{uuid.uuid4().hex[:8]}"


class Engine:
    """The container engine's command line, with the environment scripts/container-engine.sh chose."""

    def __init__(self, name: str, env: dict):
        self.name = name
        self.env = env

    def __call__(self, *args: str, timeout: float = 60, check: bool = True, **kw) -> subprocess.CompletedProcess:
        result = subprocess.run([self.name, *args], capture_output=True, text=True, timeout=timeout,
                                env=self.env, **kw)
        if check:
            assert result.returncode == 0, (f"{self.name} {shlex.join(args)} exited {result.returncode}:\n"
                                            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def inspect(self, name: str, template: str) -> str:
        return self("inspect", "--format", template, name).stdout.strip()


def no_engine(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The engine, with the image built from these sources (scripts/image.sh, cached)."""
    IMAGE_LOG.parent.mkdir(exist_ok=True)
    with open(IMAGE_LOG, "w") as log:
        built = subprocess.run([str(IMAGE_SCRIPT)], cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=3600)
    output = IMAGE_LOG.read_text()
    if built.returncode == 3:
        no_engine("no container engine can run here: " + output.strip().splitlines()[-1])
    assert built.returncode == 0, f"scripts/image.sh failed ({IMAGE_LOG}):\n{output[-4000:]}"
    chosen = subprocess.run([str(ENGINE_SCRIPT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert chosen.returncode == 0, chosen.stderr
    settings = dict(line.split("=", 1) for line in chosen.stdout.splitlines())
    env = dict(os.environ)
    if "CONTAINERS_CONF" in settings:
        env["CONTAINERS_CONF"] = settings["CONTAINERS_CONF"]
    return Engine(settings["ENGINE"], env)


def require_podman(engine: Engine, what: str):
    if engine.name != "podman":
        pytest.skip(f"{what} needs podman (the engine here is {engine.name})")


class Resources:
    """What one test created in the engine, removed by name at teardown."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.containers: list[str] = []
        self.volumes: list[str] = []
        self.pods: list[str] = []

    def run(self, *args: str) -> str:
        """`run -d` of the image with these options; returns the container's name."""
        name = unique("run")
        self.containers.append(name)
        self.engine("run", "-d", "--name", name, *args, IMAGE)
        return name

    def volume(self) -> str:
        name = unique("state")
        self.volumes.append(name)
        self.engine("volume", "create", name)
        return name

    def cleanup(self):
        problems = []
        # Containers first, with their anonymous volumes (the image's VOLUME), then their pods.
        for kind, names in (("container", self.containers), ("pod", self.pods), ("volume", self.volumes)):
            for name in names:
                # podman's `rm -f` stops with the stop timeout first; docker's kills at once.
                stop_now = ("-t", "0") if self.engine.name == "podman" else ()
                args = {"pod": ("pod", "rm", "-f", *stop_now, name), "container": ("rm", "-f", "-v", *stop_now, name),
                        "volume": ("volume", "rm", "-f", name)}[kind]
                result = self.engine(*args, check=False, timeout=60)
                if result.returncode != 0 and "no such" not in result.stderr.lower():
                    problems.append(f"{kind} {name}: {result.stderr.strip()}")
        assert not problems, problems


@pytest.fixture
def resources(engine):
    created = Resources(engine)
    yield created
    created.cleanup()


def secret_files(folder: Path, token: str = TOKEN, key: str = API_KEY) -> tuple[Path, Path]:
    """token.txt and api-key.txt as docs/containers.md makes them: mode 0600, owned by uid 10001. Without
    root (no chown) mode 0644, so uid 10001 reads them whatever uid the engine maps it to."""
    token_file, key_file = folder / "token.txt", folder / "api-key.txt"
    token_file.write_text(token + "\n")
    key_file.write_text(key + "\n")
    for f in (token_file, key_file):
        if os.geteuid() == 0:
            f.chmod(0o600)
            os.chown(f, USER_ID, -1)
        else:
            f.chmod(0o644)
    return token_file, key_file


def secret_mounts(token_file: Path, key_file: Path) -> list[str]:
    return ["-v", f"{token_file}:/run/secrets/platform-proxy-token:ro",
            "-v", f"{key_file}:/run/secrets/platform-proxy-api-key:ro"]


def config_mount(folder: Path, config: dict) -> list[str]:
    path = folder / "platform-proxy.json"
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o644)
    return ["-v", f"{path}:/etc/platform-proxy/platform-proxy.json:ro"]


def health(port: int, path: str = "/_platform/health") -> int | None:
    try:
        return http_call(f"http://127.0.0.1:{port}{path}", timeout=2).status
    except OSError:
        return None


def wait_healthy(engine: Engine, name: str, port: int, timeout: float = START_SECONDS) -> float:
    """Seconds until /_platform/health answers 200 (the container's log when it does not)."""
    start = time.monotonic()
    if wait_until(lambda: health(port) == 200, timeout=timeout, interval=0.05):
        return time.monotonic() - start
    logs = engine("logs", name, check=False)
    pytest.fail(f"{name}: no 200 from /_platform/health within {timeout} s\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")


def host_network_config(port: int, routes: list, provider: dict | None = None, api_key: bool = True) -> dict:
    """A config for a container on the host's network: its own loopback port, the mounted secrets."""
    config = {
        "listen": [f"127.0.0.1:{port}"],
        "stateDirectory": "/var/lib/platform-proxy",
        "provider": provider or {"grant": "static", "tokenType": "Bearer",
                                 "accessToken": {"file": "/run/secrets/platform-proxy-token"}},
        "routes": routes,
    }
    if api_key:
        config["apiKey"] = {"file": "/run/secrets/platform-proxy-api-key"}
    return config


# ------------------------------------------------------------------ the image's own config


@pytest.fixture
def default_container(engine, resources, tmp_path):
    """The image as docs/containers.md runs it: its own config, the two secret files, 8080 published on loopback."""
    port = free_port()
    token_file, key_file = secret_files(tmp_path)
    started = time.monotonic()
    name = resources.run("-p", f"127.0.0.1:{port}:8080", *secret_mounts(token_file, key_file))
    return name, port, started


def test_image_starts_and_answers_health_within_seconds(engine, default_container):
    name, port, started = default_container
    wait_healthy(engine, name, port)
    elapsed = time.monotonic() - started
    assert elapsed < START_SECONDS, f"{elapsed:.1f} s from run to health"
    assert health(port, "/_platform/ready") == 200, "the token file is mounted: credentials are usable"


def test_image_healthcheck_passes(engine, default_container):
    name, port, _ = default_container
    wait_healthy(engine, name, port)
    assert engine.inspect(name, "{{.Config.Healthcheck.Test}}").count("/_platform/health") == 1
    if engine.name == "podman":
        engine("healthcheck", "run", name)  # runs the check now: exit 0 when it passes

    def health_state() -> dict:
        state = json.loads(engine.inspect(name, "{{json .State}}"))
        return state.get("Health") or state.get("Healthcheck") or {}  # podman 4.3 says Healthcheck
    # docker runs the first check after the 10 s interval
    status = wait_until(lambda: health_state().get("Status") == "healthy", timeout=30, interval=0.5)
    assert status, health_state()


def test_image_runs_as_uid_10001(engine, default_container):
    name, port, _ = default_container
    wait_healthy(engine, name, port)
    status = engine("exec", name, "cat", "/proc/1/status").stdout
    uids = re.search(r"^Uid:\s+(.*)$", status, re.M).group(1).split()
    gids = re.search(r"^Gid:\s+(.*)$", status, re.M).group(1).split()
    assert uids == [str(USER_ID)] * 4 and gids == [str(USER_ID)] * 4, status
    assert "platform-proxy" in engine("exec", name, "cat", "/proc/1/cmdline").stdout


def test_image_refuses_a_request_without_the_key(engine, default_container):
    name, port, _ = default_container
    wait_healthy(engine, name, port)
    refused = http_call(f"http://127.0.0.1:{port}/api/anything")
    assert refused.status == 401, refused
    assert refused.header("content-type").startswith("application/json"), refused.headers


def test_stop_ends_the_proxy_with_exit_0_within_the_grace(engine, default_container):
    name, port, _ = default_container
    wait_healthy(engine, name, port)
    start = time.monotonic()
    engine("stop", "-t", str(STOP_GRACE_SECONDS), name, timeout=STOP_GRACE_SECONDS + 30)
    elapsed = time.monotonic() - start
    assert engine.inspect(name, "{{.State.ExitCode}}") == "0", engine("logs", name).stderr[-3000:]
    assert elapsed < STOP_GRACE_SECONDS, f"stop took {elapsed:.1f} s: SIGTERM did not end it, the grace did"


def test_image_is_small(engine):
    size = int(engine("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip())
    assert size <= MAX_IMAGE_MIB * 1024 * 1024, f"{size / 2**20:.1f} MiB > {MAX_IMAGE_MIB} MiB"


# ---------------------------------------------------------- your own config, on the host


def test_mounted_config_token_and_key_reach_an_upstream_on_the_host(engine, resources, tmp_path, main_upstream):
    port = free_port()
    token_file, key_file = secret_files(tmp_path)
    config = host_network_config(port, [{"name": "api", "path": "/api/", "upstream": main_upstream.url("/"),
                                         "credential": "access_token", "timeoutSeconds": 10}])
    name = resources.run("--network=host", *config_mount(tmp_path, config), *secret_mounts(token_file, key_file))
    wait_healthy(engine, name, port)

    answer = http_call(f"http://127.0.0.1:{port}/api/hello?x=1", headers={"X-Proxy-Key": API_KEY})
    assert answer.status == 200, answer
    seen = main_upstream.wait_for(lambda r: r)
    assert seen and [r.path for r in main_upstream.records] == ["/hello"], main_upstream.dump()
    assert main_upstream.records[0].header("authorization") == f"Bearer {TOKEN}"

    refused = http_call(f"http://127.0.0.1:{port}/api/hello", headers={"X-Proxy-Key": "wrong"})
    missing = http_call(f"http://127.0.0.1:{port}/api/hello")
    assert refused.status == 401 and missing.status == 401, (refused, missing)
    assert len(main_upstream.records) == 1, "a refused request reached the upstream"


def test_state_volume_keeps_a_login_across_a_container_restart(engine, resources, tmp_path, idp_factory):
    """A browser login (PKCE, against the test IdP on the host) in one container; the next
    container on the same volume is logged in without one."""
    idp = idp_factory()
    port = free_port()
    volume = resources.volume()
    # On loopback without a key, as a browser logs in (it sends no X-Proxy-Key).
    config = host_network_config(port, routes_for(idp), provider=provider_for(idp, port), api_key=False)
    mounts = [*config_mount(tmp_path, config), "-v", f"{volume}:/var/lib/platform-proxy"]

    first = resources.run("--network=host", *mounts)
    wait_healthy(engine, first, port)
    proxy = CredProxy(None, port, None, config)
    # /_platform/login answers 404 until discovery completes, a moment after start.
    assert wait_until(lambda: proxy.call("/_platform/login").status == 302, timeout=10), proxy.call("/_platform/login")
    trace = browser_login(proxy)
    assert trace.callback_reply.status == 200, trace.callback_reply
    proxy.wait_state("logged_in", timeout=10)
    assert proxy.call("/api/whoami").status == 200
    engine("stop", "-t", str(STOP_GRACE_SECONDS), first, timeout=STOP_GRACE_SECONDS + 30)
    assert engine.inspect(first, "{{.State.ExitCode}}") == "0"
    engine("rm", "-v", first)

    second = resources.run("--network=host", *mounts)
    wait_healthy(engine, second, port)
    assert proxy.auth()["state"] == "logged_in", "the login did not survive the restart"
    after = proxy.call("/api/whoami")
    assert after.status == 200, after
    assert idp.control.endpoint_calls("authorize") == 1, "the second container logged in again"


# ------------------------------------------------------------------ Kubernetes, compose


def pod_manifest(name: str, token_dir: Path, upstream_port: int) -> list[dict]:
    """Docker/kubernetes-sidecar.yaml for `podman kube play` here: the images are the local one
    (no registry), the names unique, the route's upstream a stand-in in the same pod (a second
    platform-proxy serving a mock file on the pod's loopback) instead of api.example.com, and the
    token Secret a hostPath folder: podman 4.3 (Debian 12's) writes a Secret volume's values
    base64-encoded into its files (docs/containers.md)."""
    documents = [d for d in yaml.safe_load_all(K8S_FILE.read_text()) if d]
    configmap = next(d for d in documents if d["kind"] == "ConfigMap")
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    config_name = f"{name}-config"
    config = json.loads(configmap["data"]["platform-proxy.json"])
    config["routes"][0]["upstream"] = f"http://127.0.0.1:{upstream_port}/"
    configmap["metadata"]["name"] = config_name
    configmap["data"]["platform-proxy.json"] = json.dumps(config, indent=2)

    stand_in = {
        "listen": [f"127.0.0.1:{upstream_port}"],
        "routes": [{"name": "stand-in", "path": "/", "mock": {"directory": "/etc/stand-in", "mode": "replay"}}],
    }
    stand_in_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-stand-in"},
                    "data": {"platform-proxy.json": json.dumps(stand_in), "hello.json": json.dumps({"hello": "pod"})}}

    deployment["metadata"]["name"] = name
    pod = deployment["spec"]["template"]["spec"]
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["image"] = IMAGE
    for volume in pod["volumes"]:
        if "configMap" in volume:
            volume["configMap"]["name"] = config_name
        if "secret" in volume:
            del volume["secret"]
            volume["hostPath"] = {"path": str(token_dir), "type": "Directory"}
    pod["containers"].append({
        "name": "stand-in-upstream", "image": IMAGE,
        "args": ["serve", "--config", "/etc/stand-in/platform-proxy.json"],
        "securityContext": {"runAsUser": USER_ID, "runAsGroup": USER_ID},
        "volumeMounts": [{"name": "stand-in", "mountPath": "/etc/stand-in", "readOnly": True}],
    })
    pod["volumes"].append({"name": "stand-in", "configMap": {"name": f"{name}-stand-in"}})
    return [configmap, stand_in_map, deployment]


def test_kubernetes_sidecar_runs_under_podman_kube_play(engine, resources, tmp_path):
    require_podman(engine, "`kube play`")
    name = unique("pod")
    token_dir = tmp_path / "token"
    token_dir.mkdir(mode=0o755)
    (token_dir / "token").write_text(TOKEN + "\n")
    (token_dir / "token").chmod(0o644)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump_all(pod_manifest(name, token_dir, free_port())))
    resources.pods += [f"{name}-pod-0", f"{name}-pod"]  # podman 4.3 names the pod of a Deployment -pod-0
    resources.volumes += [f"{name}-config", f"{name}-stand-in"]  # kube play's volumes of the ConfigMaps
    engine("kube", "play", str(manifest), timeout=120)
    names = [n for n in engine("ps", "-a", "--format", "{{.Names}}").stdout.split() if n.startswith(name)]
    resources.containers += names
    proxy = next((n for n in names if n.endswith("-platform-proxy")), None)
    app = next((n for n in names if n.endswith("-app")), None)
    assert proxy and app, names

    def ready():
        result = engine("exec", proxy, "curl", "-fsS", "--noproxy", "*", "--max-time", "2",
                        "http://127.0.0.1:8080/_platform/ready", check=False)
        return result.returncode == 0 and result.stdout
    assert wait_until(ready, timeout=20, interval=0.5), engine("logs", proxy, check=False).stderr[-3000:]
    # The stand-in app calls every 10 s, the first time as it starts (maybe before the proxy listens).
    answered = wait_until(lambda: '"hello"' in engine("logs", app, check=False).stdout, timeout=25, interval=0.5)
    app_log = engine("logs", app, check=False)
    assert answered, f"the app's calls were not answered:\n{app_log.stdout[-2000:]}{app_log.stderr[-2000:]}"
    first = app_log.stdout[app_log.stdout.index('{"hello"'):]
    assert json.JSONDecoder().raw_decode(first)[0] == {"hello": "pod"}, app_log.stdout[-2000:]


def compose_command(engine: Engine) -> list[str]:
    """podman-compose (requirements.txt) for podman, the engine's own `docker compose` for docker."""
    if engine.name == "docker":
        return ["docker", "compose"]
    beside = Path(sys.executable).parent / "podman-compose"
    if not beside.is_file():
        pytest.fail("podman-compose is not installed: pip install -r Tests/Integration/requirements.txt",
                    pytrace=False)
    return [str(beside)]


def test_compose_example_services_start(engine, resources, tmp_path):
    """Docker/compose.yaml as it is, with the two stand-in images replaced by the local one (no
    registry): the echo service becomes a platform-proxy serving a mock file on port 80."""
    project = unique("compose")
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    stand_in.chmod(0o755)
    (stand_in / "hello.json").write_text(json.dumps({"hello": "compose"}))
    (stand_in / "platform-proxy.json").write_text(json.dumps({
        "listen": ["0.0.0.0:80"], "allowedHosts": ["echo"],
        "routes": [{"name": "stand-in", "path": "/", "mock": {"directory": "/etc/stand-in", "mode": "replay"}}],
    }))
    for f in stand_in.iterdir():
        f.chmod(0o644)
    override = tmp_path / "compose.override.yaml"
    override.write_text(yaml.safe_dump({"services": {
        "platform-proxy": {"image": IMAGE},
        # Port 80 as the example's echo service: the stand-in runs as root.
        "echo": {"image": IMAGE, "user": "0:0", "volumes": [f"{stand_in}:/etc/stand-in:ro"],
                 "command": ["serve", "--config", "/etc/stand-in/platform-proxy.json"]},
        # The image's entrypoint is the proxy; env runs the example's own `sh -c` command.
        "app": {"image": IMAGE, "entrypoint": ["/usr/bin/env"]},
    }}))
    compose = [*compose_command(engine), "-p", project, "-f", str(COMPOSE_FILE), "-f", str(override)]
    env = {k: v for k, v in engine.env.items() if not k.startswith("PLATFORM_PROXY_")}

    def run(*args, timeout=180):
        return subprocess.run([*compose, *args], capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=tmp_path, stdin=subprocess.DEVNULL)

    up = run("up", "-d")
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        names = {service: next(n for n in engine("ps", "-a", "--format", "{{.Names}}").stdout.split()
                               if n.startswith(project) and service in n.removeprefix(project))
                 for service in ("platform-proxy", "echo", "app")}
        proxy, app = names["platform-proxy"], names["app"]
        healthy = wait_until(lambda: engine("exec", proxy, "curl", "-fsS", "--noproxy", "*",
                                            "http://127.0.0.1:8080/_platform/ready", check=False).returncode == 0,
                             timeout=20, interval=0.5)
        assert healthy, engine("logs", proxy, check=False).stderr[-3000:]
        # The app calls every 10 s (with podman before 4.6 it starts without waiting for the health check).
        answered = wait_until(lambda: '"compose"' in engine("logs", app, check=False).stdout, timeout=30, interval=0.5)
        app_log = engine("logs", app, check=False)
        assert answered, f"the app's calls were not answered:\n{app_log.stdout[-2000:]}{app_log.stderr[-2000:]}"
        assert '"status":"ok"' in app_log.stdout.replace(" ", "")
        for service, name in names.items():
            assert engine.inspect(name, "{{.State.Running}}") == "true", service
    finally:
        # The containers with their anonymous volumes (compose's `down -v` removes the named ones),
        # dependents first: podman refuses to remove a container another one requires.
        created = [n for n in engine("ps", "-a", "--format", "{{.Names}}").stdout.split() if n.startswith(project)]
        for service in ("app", "platform-proxy", "echo"):
            for name in created:
                if name.removeprefix(project).strip("_-").startswith(service):
                    engine("rm", "-f", "-v", name, check=False)
        down = run("down", "-v", "-t", "10")
        assert down.returncode == 0, down.stdout[-2000:] + down.stderr[-2000:]


# ------------------------------------------------------------------ the engine's choice


def test_engine_choice_ignores_a_docker_client_without_a_daemon(tmp_path):
    """A `docker` program whose daemon does not answer (`docker info` fails) is not the engine,
    as with a docker client installed on a machine without dockerd."""
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CONTAINER_ENGINE", "CONTAINERS_CONF")}
    env["PATH"] = f"{fake.parent}:{env['PATH']}"
    chosen = subprocess.run([str(ENGINE_SCRIPT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=env)
    if chosen.returncode == 3:
        assert "no container engine" in chosen.stderr
        return
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.splitlines()[0] == "ENGINE=podman", chosen.stdout


def test_podman_limits_stay_within_the_hard_limits(engine):
    """The containers.conf podman gets: runc, and limits no container start can be refused for."""
    require_podman(engine, "containers.conf")
    conf = Path(engine.env["CONTAINERS_CONF"]).read_text()
    limits = dict(re.findall(r'"(\w+)=(\d+):\d+"', conf))
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(which)[1]
        assert name in limits and (hard == resource.RLIM_INFINITY or int(limits[name]) <= hard), (name, conf)
    if shutil.which("runc"):
        assert 'runtime = "runc"' in conf, conf
