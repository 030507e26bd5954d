"""Analytics input bounds (docs/analytics.md, "Input bounds"), through the real binary: value length, events
per request, stored bytes (oldest dropped first), bytes per upload, uploads that do not stall
the event loops, and a database file that shrinks once its values are gone.
"""

from __future__ import annotations

import http.client
import sqlite3
import threading
import time

from test_analytics import key, launch, sink  # noqa: F401 (fixture)


def value_of(n: int, tag: str = "") -> str:
    return (tag + "v" * n)[:n]


def store_size(a) -> int:
    total = 0
    for suffix in ("", "-wal"):
        path = a.state_dir / f"analytics.sqlite{suffix}"
        if path.exists():
            total += path.stat().st_size
    return total


def fill(a, events_total: int, value_bytes: int, per_request: int, timestamp: int | None = None):
    sent = 0
    while sent < events_total:
        n = min(per_request, events_total - sent)
        events = [{"key": f"fill.k{sent + i}", "value": value_of(value_bytes, f"{sent + i}:")} for i in range(n)]
        if timestamp is not None:
            for e in events:
                e["timestamp"] = timestamp
        r = a.events(events)
        assert r.status == 202, r
        sent += n


def test_value_longer_than_max_value_bytes_gets_413_naming_the_event(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    r = a.events([{"key": "ok", "value": "1"}, {"key": "ok2", "value": value_of(1024)},
                  {"key": "big", "value": value_of(1025)}])
    assert r.status == 413, r
    body = r.json()
    assert body["error"] == "analytics_too_large" and body["message"].startswith("events[2]: value"), body
    assert a.flush()["sent"] == 0, "nothing of a refused request is stored"


def test_more_events_than_max_events_per_request_gets_413(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxEventsPerRequest=10)
    r = a.events([{"key": f"k{i}"} for i in range(11)])
    assert r.status == 413 and r.json()["error"] == "analytics_too_large", r
    assert a.events([{"key": f"k{i}"} for i in range(10)]).status == 202


def test_key_longer_than_256_bytes_gets_400_naming_the_event(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    r = a.events([{"key": "ok"}, {"key": "k" * 300}])
    assert r.status == 400 and r.json()["message"].startswith("events[1]:"), r


def test_key_limit_is_configurable(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxKeyBytes=400)
    assert a.events([{"key": "k" * 300}]).status == 202
    r = a.events([{"key": "k" * 400}])
    assert r.status == 400 and r.json()["message"].startswith("events[0]:"), r


def test_stored_bytes_are_capped_oldest_dropped_first(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxStoredBytes=1 << 20)
    fill(a, 3000, 1000, per_request=500)
    a.flush()
    received = [k for upload in sink.accepted() for k, _ in upload.pairs()]
    stored_bytes = sum(len(k) + 1000 for k in received)
    assert stored_bytes <= (1 << 20) * 1.2, f"{stored_bytes} bytes survived a 1 MiB cap"
    assert key("fill.k2999") in received, "the newest values are kept"
    assert key("fill.k0") not in received, "the oldest values go first"
    assert a.metric("dropped_total", reason="bytes") >= 3000 - len(received)


def test_upload_bodies_stay_within_max_upload_bytes(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxUploadBytes=16384, maxBatch=10000)
    now = int(time.time())
    fill(a, 200, 1000, per_request=200, timestamp=now)  # one subject, one second: one batch group
    report = a.flush()
    assert report["sent"] == 200 and report["remaining"] == 0, report
    uploads = sink.accepted()
    assert len(uploads) >= 12, len(uploads)
    for upload in uploads:
        assert len(upload.raw) <= 16384, len(upload.raw)


def test_health_stays_fast_while_a_full_store_is_flushed_and_the_file_shrinks_after(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxStoredBytes=16 << 20, maxBatch=10000)
    fill(a, 15000, 1000, per_request=900)
    full = store_size(a)
    assert full > 12 << 20, full

    latencies: list[float] = []
    stop = threading.Event()

    def probe():
        conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
        for _ in range(100_000):
            if stop.is_set():
                break
            start = time.perf_counter()
            conn.request("GET", "/_platform/health")
            resp = conn.getresponse()
            resp.read()
            latencies.append(time.perf_counter() - start)
            time.sleep(0.002)
        conn.close()

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        report = a.flush()
    finally:
        stop.set()
        prober.join(15)
    assert report["remaining"] == 0, report
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] if len(latencies) >= 100 else latencies[-1]
    print(f"\nhealth during the flush of a {full / 2**20:.1f} MiB store: {len(latencies)} probes, "
          f"p50 {latencies[len(latencies) // 2] * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {latencies[-1] * 1000:.2f} ms")
    # The bound in the issue is 10 ms on an idle machine; a shared CI core gets a generous margin.
    assert p99 < 0.05, f"health p99 {p99 * 1000:.1f} ms during a flush"

    a.flush()  # the next cycle gives the freed pages back
    shrunk = store_size(a)
    print(f"analytics.sqlite(+wal): {full / 2**20:.1f} MiB full, {shrunk / 2**20:.2f} MiB after the flush")
    assert shrunk < full / 4, (full, shrunk)


def test_existing_database_without_incremental_vacuum_is_converted(start_proxy, sink, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "analytics.sqlite")
    db.execute("CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT NULL, key TEXT NOT NULL,"
               " value TEXT NOT NULL, timestamp INTEGER NOT NULL)")
    db.execute("INSERT INTO events(subject, key, value, timestamp) VALUES ('jdoe', 'pennmobile.old', '1', ?)",
               (int(time.time()),))
    db.commit()
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    db.close()
    a = launch(start_proxy, sink, tmp_path, state_dir=state)
    a.flush()
    assert ("pennmobile.old", "1") in [p for u in sink.accepted() for p in u.pairs()], "the old values survive"
    a.server.stop()
    db = sqlite3.connect(state / "analytics.sqlite")
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    db.close()
