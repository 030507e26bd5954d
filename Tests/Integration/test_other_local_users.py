"""What another local user can do to a proxy on the same machine, against the real binary.

- The start lock (which serialises two starts on one port) is an abstract Unix socket, not a
  file in /tmp: a symbolic link planted at the old lock path is never followed, a lock held on
  that file no longer stops a start (nor SIGTERM), and a squatted lock name delays a start by
  its deadline only.
- A state directory, or a file in it, that anyone but the proxy's user (or root) may write is
  refused at start, naming the path, its owner and its mode: its tokens could be someone else's.

The lock tests run the proxy in a private mount namespace with its own empty /tmp, so what they
plant or hold at /tmp/platform-proxy.bind.lock touches no other process on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from credentials_support import free_port
from proxy import ProxyProcess, base_config, require_binary, write_mock_dir

OLD_LOCK_PATH = "/tmp/platform-proxy.bind.lock"
NOBODY = 65534
LOCK_DEADLINE_SECONDS = 2.0  # StartLock.defaultDeadline


def private_tmp_works() -> bool:
    try:
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tmpfs /tmp"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


needs_private_tmp = pytest.mark.skipif(os.geteuid() != 0 or not private_tmp_works(),
                                       reason="needs root and mount namespaces for a private /tmp")


class PrivateTmpProxy(ProxyProcess):
    """A ``serve`` whose /tmp is an empty tmpfs of its own; ``setup`` is shell run there first
    (as the same process, which then becomes the proxy: the PID is the proxy's)."""

    def __init__(self, config: dict, workdir: Path, setup: str):
        super().__init__(config, workdir, "private-tmp")
        self.setup = setup

    def launch(self) -> "PrivateTmpProxy":
        """Starts without waiting for ``listening``."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=2))
        binary = Path(require_binary())
        if str(binary.resolve()).startswith("/tmp/"):
            # A checkout under /tmp (a CI clone) would vanish under the private /tmp: run a copy
            # from the work folder, which the tests keep outside /tmp.
            copy = self.workdir / "platform-proxy"
            shutil.copy2(binary, copy)
            binary = copy
        script = f'mount -t tmpfs tmpfs /tmp && {self.setup} && exec "$0" serve --config "$1"'
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                 str(binary), str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.workdir)
        return self


@pytest.fixture
def outside_tmp():
    """A directory outside /tmp (hidden from the proxy by its private /tmp otherwise)."""
    folder = Path(tempfile.mkdtemp(prefix="pp-lock-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def fixed_port_config(folder: Path, port: int) -> dict:
    # A fixed port: only those take the start lock (port 0 cannot collide).
    mock = write_mock_dir(folder / "mock", {"index": {"mock": "index"}})
    return base_config(mock, listen=[f"127.0.0.1:{port}"], stateDirectory=str(folder / "state"))


def wait_listening(server: ProxyProcess, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.log_events("listening"):
            return True
        if server.proc.poll() is not None:
            return False
        time.sleep(0.02)
    return bool(server.log_events("listening"))


def stop_or_kill(server: ProxyProcess, timeout: float = 10.0) -> int | None:
    """SIGTERM, then the exit code; None (after SIGKILL) when SIGTERM was not acted on."""
    if server.proc.poll() is None:
        server.signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            return None
    return server.proc.returncode


# --------------------------------------------------------------------------- the start lock


@needs_private_tmp
def test_a_symlink_planted_at_the_old_lock_path_is_never_followed(outside_tmp):
    planted = outside_tmp / "created-by-the-proxy"
    server = PrivateTmpProxy(fixed_port_config(outside_tmp, free_port()), outside_tmp / "p",
                             setup=f"ln -s {planted} {OLD_LOCK_PATH}").launch()
    try:
        assert wait_listening(server, 10), server.stderr_text()[-2000:]
        assert not planted.exists(), "the proxy followed a link at /tmp/platform-proxy.bind.lock and created its target"
    finally:
        assert stop_or_kill(server) == 0, server.stderr_text()[-2000:]


@needs_private_tmp
def test_a_lock_held_on_the_old_lock_file_neither_hangs_the_start_nor_blocks_sigterm(outside_tmp):
    # The shell takes the flock on a descriptor the proxy inherits: a start that opened the file
    # again and waited for the lock would wait for ever, with SIGTERM blocked.
    server = PrivateTmpProxy(fixed_port_config(outside_tmp, free_port()), outside_tmp / "p",
                             setup=f"exec 9>{OLD_LOCK_PATH} && flock 9").launch()
    try:
        assert wait_listening(server, 10), "no listening line while a lock on the old lock file was held:\n" \
            + server.stderr_text()[-2000:]
    finally:
        code = stop_or_kill(server, timeout=10)
    assert code == 0, f"SIGTERM was not acted on (exit {code}):\n{server.stderr_text()[-2000:]}"


def squat_lock_name(port: int) -> socket.socket:
    """Binds the proxy's start-lock name for ``port``, as any local user can."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"\0platform-proxy.start.{port}")
    return s


def test_a_squatted_start_lock_delays_the_start_by_its_deadline_only(tmp_path):
    port = free_port()
    squatter = squat_lock_name(port)
    server = ProxyProcess(fixed_port_config(tmp_path, port), tmp_path / "p", "squatted")
    try:
        began = time.monotonic()
        server.start()
        took = time.monotonic() - began
        busy = server.log_events("start_lock_busy")
        assert busy and busy[0]["port"] == port, server.stderr_text()[-2000:]
        assert LOCK_DEADLINE_SECONDS - 0.2 <= took < LOCK_DEADLINE_SECONDS + 5, took
        assert server.get("/_platform/health").status == 200
        # The probe alone still refuses a second proxy on the port.
        second = subprocess.run([str(require_binary()), "serve", "--config", str(server.config_path)],
                                capture_output=True, text=True, timeout=20)
        assert second.returncode == 1 and f"address 127.0.0.1:{port} already in use" in second.stderr, second.stderr
    finally:
        squatter.close()
        assert server.stop() == 0


def test_sigterm_while_waiting_for_a_squatted_start_lock_ends_the_process(tmp_path):
    port = free_port()
    squatter = squat_lock_name(port)
    config = fixed_port_config(tmp_path, port)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(path)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # inside the lock's wait
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=LOCK_DEADLINE_SECONDS + 10)
        assert time.monotonic() - began < LOCK_DEADLINE_SECONDS + 5
        assert proc.returncode == 0, err[-2000:]
        assert '"shutting_down"' in err, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        squatter.close()


def test_two_proxies_starting_together_on_one_port_leave_exactly_one_listening(tmp_path):
    for round_ in range(3):
        port = free_port()
        folder = tmp_path / f"r{round_}"
        folder.mkdir()
        procs = []
        for name in ("a", "b"):
            path = folder / f"{name}.json"
            path.write_text(json.dumps(fixed_port_config(folder / name, port)))
            procs.append(subprocess.Popen([str(require_binary()), "serve", "--config", str(path)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=open(folder / f"{name}.log", "wb")))
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and all(p.poll() is None for p in procs):
                time.sleep(0.05)
            exited = [p for p in procs if p.poll() is not None]
            assert len(exited) == 1, "both proxies kept running on one port (or both exited)"
            assert exited[0].returncode == 1
            name = "a" if exited[0] is procs[0] else "b"
            assert f"address 127.0.0.1:{port} already in use" in (folder / f"{name}.log").read_text()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(10)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait(5)


# --------------------------------------------------------------------------- the state directory


def serve_expecting_refusal(config: dict, folder: Path, timeout: float = 15.0) -> tuple[int, list[dict], str]:
    """Runs ``serve``; returns its exit code, its startup_failed lines and its stderr. Fails
    (after stopping it) if it keeps running: it then uses what it should have refused."""
    path = folder / "c.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(path)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        pytest.fail(f"serve started with a state directory others can write:\n{err[-2000:]}")
    failed = [json.loads(line) for line in err.splitlines() if '"startup_failed"' in line]
    return proc.returncode, failed, err


def planted_tokens(access_token: str) -> str:
    return json.dumps({"access_token": access_token, "token_type": "Bearer", "expires_at": time.time() + 3600})


def oauth_config(folder: Path, state: Path) -> dict:
    """Two OAuth providers (token files tokens-<name>.json); nothing needs to answer."""
    provider = {"grant": "client_credentials", "clientID": "c", "clientSecret": "s",
                "tokenEndpoint": "http://127.0.0.1:9/token", "scopes": ["read"]}
    return {"listen": ["127.0.0.1:0"], "stateDirectory": str(state),
            "providers": {"billing": provider, "search": provider},
            "routes": [{"name": "billing", "path": "/billing", "upstream": "http://127.0.0.1:9/",
                        "credential": "access_token", "provider": "billing"}]}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory another user owns")
def test_a_world_writable_state_directory_of_another_user_is_refused_naming_path_owner_and_mode(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "tokens-billing.json").write_text(planted_tokens("planted-by-nobody"))
    os.chown(state / "tokens-billing.json", NOBODY, NOBODY)
    os.chown(state, NOBODY, NOBODY)
    state.chmod(0o777)
    code, failed, err = serve_expecting_refusal(oauth_config(tmp_path, state), tmp_path)
    assert code == 1, err[-2000:]
    assert failed, err[-2000:]
    line = failed[-1]
    assert line["path"] == str(state) and line["owner"] == NOBODY and line["mode"] == "0777", line
    assert f"state directory {state} is owned by uid {NOBODY} (gid {NOBODY}) with mode 0777" in line["error"], line
    assert "planted-by-nobody" not in err


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory another user owns")
@pytest.mark.parametrize("owner,group,mode", [
    (NOBODY, NOBODY, 0o700),  # private, but another user's: they write it
    (None, NOBODY, 0o770),  # ours, writable by a group others are in
    (None, None, 0o757),  # ours, writable by others
    (0, 0, 0o1777),  # root's sticky /tmp-like directory: others create the files not written yet
], ids=["other-users-0700", "own-shared-group-0770", "own-0757", "root-sticky-1777"])
def test_a_state_directory_others_can_write_is_refused(tmp_path, owner, group, mode):
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, -1 if owner is None else owner, -1 if group is None else group)
    state.chmod(mode)
    code, failed, err = serve_expecting_refusal(base_config(stateDirectory=str(state)), tmp_path)
    assert code == 1 and failed, err[-2000:]
    expected_owner = os.geteuid() if owner is None else owner
    assert failed[-1]["path"] == str(state) and failed[-1]["owner"] == expected_owner, failed[-1]
    assert failed[-1]["mode"] == f"{mode:04o}", failed[-1]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file another group")
@pytest.mark.parametrize("kind", ["writable-by-others", "writable-by-group"])
def test_a_token_file_others_can_write_is_refused(tmp_path, kind):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    token = state / "tokens-search.json"
    token.write_text(planted_tokens("planted-token"))
    if kind == "writable-by-group":
        os.chown(token, -1, NOBODY)  # nogroup: not the proxy user's private group
    token.chmod(0o666 if kind == "writable-by-others" else 0o620)
    code, failed, err = serve_expecting_refusal(oauth_config(tmp_path, state), tmp_path)
    assert code == 1 and failed, err[-2000:]
    mode = "0666" if kind == "writable-by-others" else "0620"
    assert failed[-1]["path"] == str(token) and failed[-1]["mode"] == mode, failed[-1]
    gid = os.getegid() if kind == "writable-by-others" else NOBODY
    assert f"state file {token} is owned by uid {os.geteuid()} (gid {gid}) with mode {mode}" in failed[-1]["error"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file another user owns")
def test_a_token_file_another_user_owns_or_links_to_is_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    theirs = tmp_path / "theirs.json"
    theirs.write_text(planted_tokens("planted-token"))
    os.chown(theirs, NOBODY, NOBODY)
    theirs.chmod(0o600)
    (state / "tokens-billing.json").symlink_to(theirs)
    code, failed, err = serve_expecting_refusal(oauth_config(tmp_path, state), tmp_path)
    assert code == 1 and failed, err[-2000:]
    assert failed[-1]["path"] == str(state / "tokens-billing.json") and failed[-1]["owner"] == NOBODY, failed[-1]


def test_a_private_state_directory_with_private_files_is_used(start_proxy, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "tokens-billing.json").write_text(planted_tokens("stored-token"))
    (state / "tokens-billing.json").chmod(0o600)
    (state / "notes.txt").write_text("read-only for others is fine")
    (state / "notes.txt").chmod(0o644)
    server = start_proxy(config=oauth_config(tmp_path, state))
    auth = server.get("/_platform/auth").json()
    assert auth["providers"]["billing"]["state"] == "logged_in", auth
    assert not server.log_events("startup_failed")


def test_a_missing_state_directory_is_made_private_at_start_so_nobody_else_can_make_it_first(start_proxy, tmp_path):
    # A volume whose root is 0777 (a Kubernetes emptyDir shared with other containers): a missing
    # state directory passes the start's check, so another user making it afterwards, 0777, would
    # get the tokens written into their directory (and plant files the proxy reads later).
    shared = tmp_path / "volume"
    shared.mkdir()
    shared.chmod(0o777)
    state = shared / "state"
    server = start_proxy(config=oauth_config(tmp_path, state))
    info = os.stat(state)
    assert info.st_uid == os.geteuid() and info.st_mode & 0o7777 == 0o700, (info.st_uid, oct(info.st_mode))
    with pytest.raises(FileExistsError):
        state.mkdir()
    assert not server.log_events("startup_failed")


def private_group_of_this_user() -> int | None:
    """The group only this user is in (nobody else has it as primary group or is listed in it)."""
    import grp
    import pwd
    try:
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(me.pw_gid)
    except KeyError:
        return None
    if any(member != me.pw_name for member in group.gr_mem):
        return None
    if any(p.pw_gid == me.pw_gid and p.pw_uid != me.pw_uid for p in pwd.getpwall()):
        return None
    return me.pw_gid


@pytest.mark.skipif(private_group_of_this_user() is None, reason="this user has no private group")
def test_a_state_directory_writable_by_the_users_private_group_is_used(start_proxy, tmp_path):
    """User-private groups (umask 002) and Kubernetes' fsGroup make state group-writable; the
    group has no one else in it."""
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, -1, private_group_of_this_user())
    state.chmod(0o2770)
    (state / "tokens-billing.json").write_text(planted_tokens("stored-token"))
    os.chown(state / "tokens-billing.json", -1, private_group_of_this_user())
    (state / "tokens-billing.json").chmod(0o660)
    server = start_proxy(config=oauth_config(tmp_path, state))
    assert server.get("/_platform/auth").json()["providers"]["billing"]["state"] == "logged_in"


def test_check_config_warns_about_a_state_directory_serve_would_refuse(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(base_config(stateDirectory=str(state))))
    r = subprocess.run([str(require_binary()), "check-config", "--config", str(path)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r  # a warning: serve may run as another user, or after a chmod
    assert f"warning: stateDirectory: state directory {state} is owned by uid {os.geteuid()} (gid {os.getegid()}) " \
        "with mode 0777" in r.stdout, r.stdout
    assert f"serve run as uid {os.geteuid()} will refuse to start" in r.stdout, r.stdout
