"""Damaged state through the real binary: what the proxy does when the files it keeps are not
what it wrote (docs/analytics.md, docs/configuration.md "The state directory", docs/experiments.md,
docs/mocks.md).

- a damaged ``analytics.sqlite`` is set aside (kept, renamed) and a new store starts;
- a FIFO where a state file belongs neither hangs the start nor is read;
- temporaries a killed recording left behind are never served and are removed at start;
- an experiment override is acknowledged only once it is on disk;
- a full disk refuses analytics values with 507 and makes the proxy not ready until space returns.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from credentials_support import idp_factory  # noqa: F401  (fixture)
from credentials_support import launch as launch_oauth
from proxy import base_config, binary_path, write_mock_dir
from test_analytics import (Analytics, analytics_block, crash, flush_until_empty, http_call, key, launch,
                            make_tokens, parse_metrics, restart, wait_until)
from analytics_sink import AnalyticsSink


@pytest.fixture
def sink():
    s = AnalyticsSink().start()
    yield s
    s.stop()


def ready(port: int):
    r = http_call(port, "GET", "/_platform/ready")
    return r.status, r.json()


def metrics(port: int) -> dict:
    r = http_call(port, "GET", "/_platform/metrics")
    assert r.status == 200, r
    return parse_metrics(r.body.decode())


# --------------------------------------------------------------------------- 9: a damaged analytics.sqlite


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(24 * 1024))


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def bad_pages(path: Path) -> None:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    assert len(data) >= 6 * page, f"the store has only {len(data) // page} pages"
    # Every page after the first two (the header page and the schema) is noise: b-tree pages of the table and index.
    for start in range(2 * page, len(data), page):
        data[start:start + page] = os.urandom(page)
    path.write_bytes(bytes(data))


def wrong_schema(path: Path) -> None:
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE events(id INTEGER PRIMARY KEY, payload BLOB)")
        db.executemany("INSERT INTO events(payload) VALUES (?)", [(b"x" * 100,)] * 50)


def stored_store(start_proxy, sink, tmp_path) -> Analytics:
    """A store holding 400 unsent values, written by the proxy itself and closed cleanly."""
    a = launch(start_proxy, sink, tmp_path, name="writer")
    for batch in range(8):
        a.record([{"key": key(f"screen.s{batch}.n{i}"), "value": "v" * 200} for i in range(50)])
    assert a.server.stop() == 0
    return a


@pytest.mark.parametrize("damage", [garbage, truncated, bad_pages, wrong_schema], ids=lambda f: f.__name__)
def test_a_damaged_analytics_store_is_set_aside_and_a_new_one_starts(start_proxy, sink, tmp_path, damage):
    first = stored_store(start_proxy, sink, tmp_path)
    store = first.state_dir / "analytics.sqlite"
    for leftover in (first.state_dir / "analytics.sqlite-wal", first.state_dir / "analytics.sqlite-shm"):
        leftover.unlink(missing_ok=True)
    damage(store)
    damaged = store.read_bytes()

    a = restart(start_proxy, first, "after-damage")  # on a build without the fix: exits 1 before listening
    aside = sorted(a.state_dir.glob("analytics.sqlite.corrupt-*"))
    aside = [p for p in aside if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1, sorted(p.name for p in a.state_dir.iterdir())
    assert aside[0].read_bytes() == damaged, "the damaged store is kept as it was"
    events = a.server.log_events("analytics_store_set_aside")
    assert len(events) == 1, a.server.stderr_text()[-3000:]
    assert events[0]["movedTo"] == str(aside[0]) and events[0].get("error"), events[0]
    assert "lost" in events[0]["message"], events[0]

    status, body = ready(a.port)
    assert status == 200 and body["status"] == "ready", body
    assert any("set aside" in n for n in body.get("notices", [])), body
    assert metrics(a.port)["platform_proxy_analytics_store_set_aside_total"] == 1

    # The new store works: values are acknowledged, survive a restart and are uploaded.
    a.record([{"key": key("after.damage"), "value": "1"}])
    assert a.server.stop() == 0
    b = restart(start_proxy, a, "next")
    flush_until_empty(b)
    assert sink.accepted_pairs()[(key("after.damage"), "1")] == 1, sink.accepted_pairs()
    assert not b.server.log_events("analytics_store_set_aside"), "a healthy store is not set aside again"
    assert metrics(b.port)["platform_proxy_analytics_store_set_aside_total"] == 0


# --------------------------------------------------------------------------- 13: a full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 8 MiB tmpfs for the state directory: a disk that really fills up (ENOSPC). Needs the
    privilege to mount (root in the test container); skipped without it."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up: {done.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_up(directory: Path) -> Path:
    """Writes a file until the file system refuses more (ENOSPC); returns it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 64 << 10, 4 << 10):
            try:
                while True:
                    os.write(fd, b"\1" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_answers_507_with_retry_after_and_makes_the_proxy_not_ready_until_space_returns(
        small_disk, start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, state_dir=small_disk / "state")
    acked = [key("before.full")]
    a.record([{"key": acked[0], "value": "1"}])
    filler = fill_up(small_disk)

    refused = None
    for n in range(300):
        k = key(f"filling.n{n}")
        r = a.events([{"key": k, "value": "x" * 1000} for _ in range(1)] +
                     [{"key": key(f"filling.n{n}.m{i}"), "value": "y" * 1000} for i in range(20)])
        if r.status == 202:
            acked += [k] + [key(f"filling.n{n}.m{i}") for i in range(20)]
            continue
        refused = r
        break
    assert refused is not None, "the disk never filled up"
    # On a build without the fix: 500 analytics_store_failed, and ready stays 200.
    assert refused.status == 507, refused
    assert refused.json()["error"] == "analytics_store_full", refused
    assert refused.headers.get("retry-after") == "30", refused.headers
    status, body = ready(a.port)
    assert status == 503 and "full" in body["reason"], body
    m = metrics(a.port)
    assert m["platform_proxy_analytics_store_full"] == 1, m
    assert m["platform_proxy_analytics_refused_full_total"] >= 1, m
    assert a.server.log_events("analytics_store_full"), "the refusal is logged"

    filler.unlink()
    status, body = ready(a.port)
    assert status == 200, body
    a.record([{"key": key("after.space"), "value": "1"}])
    acked.append(key("after.space"))
    assert metrics(a.port)["platform_proxy_analytics_store_full"] == 0

    # Nothing acknowledged was lost on the way.
    flush_until_empty(a)
    delivered = {k for (k, _v) in sink.accepted_pairs()}
    missing = [k for k in acked if k not in delivered]
    assert not missing, f"{len(missing)} acknowledged values never arrived: {missing[:5]}"


# --------------------------------------------------------------------------- 10: a FIFO in the state folder

EXPERIMENTS = {"layout": {"variants": {"list": 1, "grid": 1}}}


@pytest.mark.parametrize("name,event", [("experiments.json", "experiments_state_unreadable"),
                                        ("installation-id", "installation_id_unreadable")])
def test_a_fifo_named_like_an_experiments_state_file_is_set_aside_not_opened(start_proxy, tmp_path, name, event):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / name, 0o600)
    # On a build without the fix, open() blocks for a writer: no "listening" within 10 s.
    server = start_proxy(config=base_config(None, stateDirectory=str(state), experiments=EXPERIMENTS))
    aside = list(state.glob(name + ".corrupt-*"))
    assert len(aside) == 1 and stat.S_ISFIFO(aside[0].lstat().st_mode), sorted(p.name for p in state.iterdir())
    logged = server.log_events(event)
    assert len(logged) == 1 and logged[0]["movedTo"] == str(aside[0]), logged
    assert "not a regular file but a FIFO" in logged[0]["reason"], logged[0]
    assert server.get("/_platform/experiments/layout").status == 200
    if name == "installation-id":
        assert (state / name).is_file(), "a new id file replaces the FIFO"
    assert server.stop() == 0


def test_a_fifo_named_tokens_json_neither_hangs_the_start_nor_is_read(start_proxy, idp_factory, tmp_path):
    idp = idp_factory()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "tokens.json", 0o600)
    p = launch_oauth(start_proxy, idp, tmp_path, state_dir=state)
    assert p.auth()["state"] == "logged_out"
    aside = list(state.glob("tokens.json.corrupt-*"))
    assert len(aside) == 1 and stat.S_ISFIFO(aside[0].lstat().st_mode), sorted(x.name for x in state.iterdir())
    assert p.server.log_events("token_store_corrupt"), "the FIFO is logged where it went"
    # SIGTERM is honoured (the start did not hang with the signals blocked).
    assert p.server.stop(timeout=10) == 0


def test_a_fifo_named_analytics_sqlite_is_set_aside(start_proxy, sink, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "analytics.sqlite", 0o600)
    a = launch(start_proxy, sink, tmp_path, state_dir=state)
    logged = a.server.log_events("analytics_store_set_aside")
    assert len(logged) == 1 and "FIFO" in logged[0]["error"], logged
    assert stat.S_ISFIFO(Path(logged[0]["movedTo"]).lstat().st_mode)
    a.record([{"key": key("after.fifo"), "value": "1"}])


def fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("sidecar", ["analytics.sqlite-wal", "analytics.sqlite-shm"])
@pytest.mark.parametrize("make", [fifo, folder], ids=lambda f: f.__name__)
def test_a_wal_or_shm_that_is_no_file_is_moved_aside_and_the_store_keeps_its_values(start_proxy, sink, tmp_path,
                                                                                     sidecar, make):
    first = launch(start_proxy, sink, tmp_path, name="writer")
    first.record([{"key": key("before.sidecar"), "value": "1"}])
    assert first.server.stop() == 0
    state = first.state_dir
    (state / sidecar).unlink(missing_ok=True)
    make(state / sidecar)

    # On a build without the fix: the start fails ("unable to open database file", "disk I/O error"),
    # or the store opens read-only and every value is refused with 500 while ready says 200.
    a = restart(start_proxy, first, "after-sidecar")
    logged = a.server.log_events("analytics_store_sidecar_set_aside")
    assert len(logged) == 1 and logged[0]["path"] == str(state / sidecar), a.server.stderr_text()[-3000:]
    moved = Path(logged[0]["movedTo"])
    assert moved.name.startswith(sidecar + ".corrupt-") and (moved.is_dir() or stat.S_ISFIFO(moved.lstat().st_mode))
    assert not a.server.log_events("analytics_store_set_aside"), "the store itself is healthy and kept"
    a.record([{"key": key("after.sidecar"), "value": "1"}])
    flush_until_empty(a)
    pairs = sink.accepted_pairs()
    assert pairs[(key("before.sidecar"), "1")] == 1 and pairs[(key("after.sidecar"), "1")] == 1, pairs


@pytest.fixture
def read_only_state(tmp_path):
    """A state folder holding a healthy store, then made read-only (a read-only bind mount: root
    ignores mode bits)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    yield state
    subprocess.run(["umount", str(state)], check=False, capture_output=True)


def test_a_read_only_state_folder_is_refused_naming_the_folder(start_proxy, sink, tmp_path, read_only_state):
    first = launch(start_proxy, sink, tmp_path, name="writer", state_dir=read_only_state)
    first.record([{"key": key("before.readonly"), "value": "1"}])
    assert first.server.stop() == 0
    subprocess.run(["mount", "--bind", str(read_only_state), str(read_only_state)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(read_only_state)], check=True)

    config = tmp_path / "readonly.json"
    config.write_text(json.dumps(first.config))
    run = subprocess.run([str(binary_path()), "serve", "--config", str(config)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1, run
    failed = [json.loads(line) for line in run.stderr.splitlines()
              if line.startswith("{") and json.loads(line).get("event") == "startup_failed"]
    assert len(failed) == 1, run.stderr
    # On a build without the fix: "sqlite3_prepare_v2(PRAGMA quick_check(1)) failed: unable to open database file".
    assert str(read_only_state) in failed[0]["error"] and "Read-only file system" in failed[0]["error"], failed[0]


def test_a_damaged_store_in_a_read_only_state_folder_is_refused_without_claiming_it_was_set_aside(
        start_proxy, sink, tmp_path, read_only_state):
    first = launch(start_proxy, sink, tmp_path, name="writer", state_dir=read_only_state)
    assert first.server.stop() == 0
    garbage(read_only_state / "analytics.sqlite")
    subprocess.run(["mount", "--bind", str(read_only_state), str(read_only_state)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(read_only_state)], check=True)

    config = tmp_path / "readonly.json"
    config.write_text(json.dumps(first.config))
    run = subprocess.run([str(binary_path()), "serve", "--config", str(config)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1, run
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    # On a build without the fix: analytics_store_set_aside says the file was moved to its own path
    # and "a new store is started", then the start fails with "file is not a database".
    assert not [e for e in events if e.get("event") == "analytics_store_set_aside"], run.stderr
    failed = [e for e in events if e.get("event") == "startup_failed"]
    assert len(failed) == 1, run.stderr
    assert "set the damaged store aside" in failed[0]["error"] and "Read-only file system" in failed[0]["error"], failed


# --------------------------------------------------------------------------- 11: partial recordings


def test_partial_recordings_are_never_served_and_are_removed_at_start(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"feed/1": {"n": 1}, "feed/2": {"n": 2}, "index": {"root": True}})
    # What a recording killed mid-write leaves: `<file>.tmp-<base36>` holding part of a body.
    partial = {mock / "feed" / "2.json.tmp-k3x9q1": b'{"n": 2, "items": [1, 2',
               mock / "feed" / "3.json.tmp-0a": b'{"trunc',
               mock / "index.json.tmp-z9": b'{"ro'}
    for path, data in partial.items():
        path.write_bytes(data)
        path.chmod(0o600)  # as the recorder creates them
    # Replay serves them while they are there, on a build without the fix: a folder replays every file in it.
    server = start_proxy(config=base_config(mock))
    bodies = [server.get("/feed").body for _ in range(6)]
    assert all(json.loads(b)["n"] in (1, 2) for b in bodies), bodies
    assert not any(p.exists() for p in partial), sorted(p.name for p in mock.rglob("*"))
    removed = server.log_events("mock_temporaries_removed")
    assert len(removed) == 1 and removed[0]["count"] == 3, removed
    assert (mock / "feed" / "1.json").exists() and (mock / "index.json").exists()


def test_a_users_file_named_like_a_temporary_is_not_deleted_at_start(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"feed/1": {"n": 1}, "index": {"root": True}})
    # Files of the user's own in a checked-out mock folder (mode 0644): only the recorder's 0600 temporaries go.
    kept = {mock / "feed" / "notes.tmp-old": b"the user's notes", mock / "schedule.tmp-2024": b"plan"}
    for path, data in kept.items():
        path.write_bytes(data)
        path.chmod(0o644)
    partial = mock / "feed" / "2.json.tmp-k3x9q1"
    partial.write_bytes(b'{"n": 2, "ite')
    partial.chmod(0o600)
    server = start_proxy(config=base_config(mock))
    # On a build without the fix: both of the user's files are deleted with the partial recording.
    assert all(path.read_bytes() == data for path, data in kept.items() if path.exists()), "changed"
    assert all(path.exists() for path in kept), sorted(p.name for p in mock.rglob("*"))
    assert not partial.exists()
    removed = server.log_events("mock_temporaries_removed")
    assert len(removed) == 1 and removed[0]["count"] == 1, removed


def test_replay_ignores_a_temporary_that_appears_while_serving(start_proxy, tmp_path):
    mock = write_mock_dir(tmp_path / "mock", {"feed/1": {"n": 1}})
    server = start_proxy(config=base_config(mock))
    (mock / "feed" / "1.json.tmp-5m2").write_bytes(b'{"n": ')
    for _ in range(4):
        r = server.get("/feed")
        assert r.status == 200 and json.loads(r.body) == {"n": 1}, r


# --------------------------------------------------------------------------- 12: overrides on disk before the 200


def test_an_acknowledged_override_survives_kill_9_right_after_the_answer(start_proxy, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = base_config(None, stateDirectory=str(state), experiments=EXPERIMENTS)
    lost = []
    for round_ in range(8):
        variant = ("list", "grid")[round_ % 2]
        server = start_proxy(config=config, name=f"round{round_}")
        r = server.request("PUT", "/_platform/experiments/layout", body=json.dumps({"variant": variant}).encode())
        assert r.status == 200, r
        server.expected_exit_code = None
        os.kill(server.pid, signal.SIGKILL)  # the process this test started, at once after the 200
        server.proc.wait(timeout=5)
        after = start_proxy(config=config, name=f"check{round_}")
        got = after.get("/_platform/experiments/layout").json()
        if got["reason"] != "override" or got["variant"] != variant:
            lost.append((round_, variant, got))
        assert after.stop() == 0
    # On a build that answers before the write, most rounds lose the override.
    assert not lost, f"{len(lost)} of 8 acknowledged overrides were lost: {lost}"
