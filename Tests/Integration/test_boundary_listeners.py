"""Listeners that cannot be taken over, against the real binary: a
second ``serve`` on the same address fails instead of sharing the port through SO_REUSEPORT,
and a ``unix:`` listener replaces only a stale socket.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from credentials_support import free_port
from proxy import ProxyProcess, base_config, require_binary, run_cli


def serve_once(config: dict, workdir, timeout: float = 15.0) -> subprocess.CompletedProcess:
    """Runs ``serve`` expecting it to refuse to start; kills it (and fails) if it runs on."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "second.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen([str(require_binary()), "serve", "--config", str(path)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the second serve kept running:\n{err[-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def short_dir():
    # sun_path is 108 bytes: pytest's tmp_path can be too long for a socket path.
    d = tempfile.mkdtemp(prefix="pp-l-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- 10. one process per address


def test_second_serve_on_the_same_address_fails_instead_of_sharing_the_port(start_proxy, tmp_path):
    port = free_port()
    first = start_proxy(workers=2, listen=[f"127.0.0.1:{port}"])
    result = serve_once(base_config(tmp_path / "mock2", listen=[f"127.0.0.1:{port}"], workers=2), tmp_path / "second")
    assert result.returncode == 1, result.stderr
    assert f"address 127.0.0.1:{port} already in use" in result.stderr, result.stderr
    # The first proxy's two loops still share the port and answer everything.
    for _ in range(40):
        assert first.get("/_platform/health").status == 200


def test_own_loops_share_the_port(start_proxy):
    port = free_port()
    server = start_proxy(workers=2, listen=[f"127.0.0.1:{port}"])
    results = []

    def one():
        # Not a probe: probes are not logged at info level.
        results.append(server.get("/no-such-route").status)

    for _ in range(5):
        threads = [threading.Thread(target=one) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        time.sleep(1.2)  # the access log is written at least once a second
        loops = {e["requestID"].split("-")[1] for e in server.log_events("request")}
        if loops == {"0", "1"}:
            break
    assert results and set(results) == {404}
    # Request IDs carry the loop index: both loops accepted on the one port.
    assert loops == {"0", "1"}, loops


# --------------------------------------------------------------------------- 11. unix: listeners


def unix_config(tmp_path, sock_path: str) -> dict:
    return base_config(tmp_path / "mock", listen=["127.0.0.1:0", f"unix:{sock_path}"])


def test_unix_listener_never_deletes_a_regular_file_at_its_path(tmp_path, short_dir):
    path = os.path.join(short_dir, "precious.txt")
    with open(path, "w") as f:
        f.write("keep me")
    result = serve_once(unix_config(tmp_path, path), tmp_path / "w")
    assert result.returncode == 1, result.stderr
    assert f"unix:{path}" in result.stderr and "regular file" in result.stderr, result.stderr
    assert open(path).read() == "keep me"


def test_unix_listener_refuses_a_socket_someone_accepts_on(tmp_path, short_dir):
    path = os.path.join(short_dir, "live.sock")
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(path)
    live.listen(1)
    try:
        result = serve_once(unix_config(tmp_path, path), tmp_path / "w")
        assert result.returncode == 1, result.stderr
        assert f"address unix:{path} already in use" in result.stderr, result.stderr
        assert os.path.exists(path)
    finally:
        live.close()


def test_unix_listener_replaces_a_stale_socket(tmp_path, short_dir):
    path = os.path.join(short_dir, "stale.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays; nobody accepts on it
    server = ProxyProcess(unix_config(tmp_path, path), tmp_path / "p", "unix")
    try:
        server.start()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(b"GET /_platform/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        assert server.stop() == 0


def test_bind_error_names_the_address(tmp_path, short_dir):
    path = os.path.join(short_dir, "no-such-dir", "p.sock")
    result = serve_once(unix_config(tmp_path, path), tmp_path / "w")
    assert result.returncode == 1
    assert f"unix:{path}" in result.stderr, result.stderr


def test_check_config_reports_a_missing_socket_directory(tmp_path, short_dir):
    path = os.path.join(short_dir, "no-such-dir", "p.sock")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(unix_config(tmp_path, path)))
    result = run_cli("check-config", "--config", str(cfg))
    assert "no-such-dir" in result.stdout and "does not exist" in result.stdout, result
