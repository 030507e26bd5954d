"""The analytics sidecar (docs/analytics.md) through the real binary.

Each test runs ``platform-proxy serve`` with a static provider (an access token and an
unsigned id_token whose ``pennkey`` claim is the subject) and an ``analytics`` block
pointing at a recording endpoint on loopback (``analytics_sink.AnalyticsSink``). Uploads
are driven by ``POST /_platform/analytics/flush`` (one upload cycle) with
``pushIntervalSeconds`` set high, except where the push timer itself is under test.

Delivery is at least once: the crash tests accept duplicates (and count them) but not a
single acknowledged value missing.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import secrets
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from analytics_sink import AnalyticsSink
from proxy import ProxyProcess, base_config

ROOT = "pennmobile"
PENNKEY = "jdoe"
SUB = "user-1"
HUGE = 3600  # a push interval that never fires during a test


# --------------------------------------------------------------------------- helpers


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_jwt(claims: dict) -> str:
    return b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode()) + "." + b64url(json.dumps(claims).encode()) + "."


@dataclass
class Tokens:
    access_path: Path
    id_path: Path
    access: str
    id: str

    def write_id(self, **claims) -> None:
        self.id = unsigned_jwt(claims)
        tmp = self.id_path.with_suffix(".tmp")
        tmp.write_text(self.id)
        tmp.replace(self.id_path)  # a new inode: the proxy's file stamp changes


def make_tokens(directory: Path, pennkey: str | None = PENNKEY, sub: str = SUB) -> Tokens:
    directory.mkdir(parents=True, exist_ok=True)
    claims = {"sub": sub, "exp": int(time.time()) + 86400}
    if pennkey is not None:
        claims["pennkey"] = pennkey
    t = Tokens(directory / "access-token.txt", directory / "id-token.txt",
               "at-" + secrets.token_hex(16), unsigned_jwt(claims))
    t.access_path.write_text(t.access)
    t.id_path.write_text(t.id)
    return t


class Reply:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Reply {self.status} {self.body[:400]!r}>"


def http_call(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 30.0) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def key(rest: str) -> str:
    return f"{ROOT}.{rest}"


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
        except OSError:
            last = None
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value {last!r})")
        time.sleep(interval)


class Analytics:
    """A running proxy with analytics, and the calls the tests make to it."""

    def __init__(self, server: ProxyProcess, state_dir: Path, tokens: Tokens, config: dict):
        self.server = server
        self.state_dir = state_dir
        self.tokens = tokens
        self.config = config

    @property
    def port(self) -> int:
        return self.server.port

    def post(self, action: str, obj) -> Reply:
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return http_call(self.port, "POST", f"/_platform/analytics/{action}", body)

    def events(self, events: list) -> Reply:
        return self.post("events", {"events": events})

    def record(self, events: list) -> dict:
        """Posts events that must be accepted; returns the 202 body."""
        r = self.events(events)
        assert r.status == 202, r
        return r.json()

    def flush(self) -> dict:
        r = self.post("flush", {})
        assert r.status == 200, r
        return r.json()

    def auth(self) -> dict:
        r = http_call(self.port, "GET", "/_platform/auth")
        assert r.status == 200, r
        return r.json()

    def wait_subject(self, subject: str, timeout: float = 10.0) -> dict:
        return wait_until(lambda: (a := self.auth())["state"] == "logged_in" and a.get("subject") == subject and a,
                          timeout=timeout, what=f"logged_in with subject {subject!r}")

    def metrics(self) -> dict:
        r = http_call(self.port, "GET", "/_platform/metrics")
        assert r.status == 200, r
        return parse_metrics(r.body.decode())

    def metric(self, name: str, **labels) -> float:
        m = self.metrics()
        label = ",".join(f'{k}="{v}"' for k, v in labels.items())
        full = f"platform_proxy_analytics_{name}" + (f"{{{label}}}" if label else "")
        assert full in m, f"{full} not in metrics: {sorted(k for k in m if 'analytics' in k)}"
        return m[full]


def parse_metrics(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def analytics_block(sink: AnalyticsSink, **overrides) -> dict:
    block = {
        "root": ROOT,
        "endpoint": sink.url,
        "credential": "access_token",
        "product": 1,
        "pushIntervalSeconds": HUGE,
        "expireIntervalSeconds": 604800,
        "bufferIntervalSeconds": 0,
        "maxBatch": 500,
        "maxStoredEvents": 100000,
    }
    block.update(overrides)
    return block


def make_config(sink: AnalyticsSink, state_dir: Path, tokens: Tokens, **analytics) -> dict:
    return base_config(None,
                       provider={"grant": "static",
                                 "accessToken": {"file": str(tokens.access_path)},
                                 "idToken": {"file": str(tokens.id_path)}},
                       stateDirectory=str(state_dir),
                       analytics=analytics_block(sink, **analytics))


def launch(start_proxy, sink: AnalyticsSink, tmp_path: Path, *, name: str = "proxy", tokens: Tokens | None = None,
           state_dir: Path | None = None, subject: str | None = PENNKEY, **analytics) -> Analytics:
    tokens = tokens or make_tokens(tmp_path / "tokens")
    state_dir = state_dir or (tmp_path / "state")
    state_dir.mkdir(parents=True, exist_ok=True)
    config = make_config(sink, state_dir, tokens, **analytics)
    a = Analytics(start_proxy(config=config, name=name), state_dir, tokens, config)
    if subject is not None:
        a.wait_subject(subject)
    return a


def restart(start_proxy, previous: Analytics, name: str, subject: str | None = PENNKEY) -> Analytics:
    a = Analytics(start_proxy(config=previous.config, name=name), previous.state_dir, previous.tokens, previous.config)
    if subject is not None:
        a.wait_subject(subject)
    return a


def crash(a: Analytics) -> None:
    """kill -9 (no shutdown path runs); the harness must not expect exit 0."""
    a.server.expected_exit_code = None
    a.server.kill()
    assert a.server.proc.returncode == -signal.SIGKILL, a.server.proc.returncode


def flush_until_empty(a: Analytics, rounds: int = 20) -> list[dict]:
    reports = []
    for _ in range(rounds):
        rep = a.flush()
        reports.append(rep)
        if rep["remaining"] == 0 and rep["deferred"] is None:
            return reports
    raise AssertionError(f"store not empty after {rounds} flushes: {reports[-3:]}")


@pytest.fixture
def sink():
    s = AnalyticsSink().start()
    yield s
    s.stop()


# --------------------------------------------------------------------------- payload


@pytest.mark.parametrize("credential,with_pennkey", [("access_token", True), ("jwt", False), ("none", True)])
def test_upload_body_and_headers_at_the_endpoint(start_proxy, sink, tmp_path, credential, with_pennkey):
    tokens = make_tokens(tmp_path / "tokens", pennkey=PENNKEY if with_pennkey else None)
    subject = PENNKEY if with_pennkey else SUB
    a = launch(start_proxy, sink, tmp_path, tokens=tokens, subject=subject, credential=credential, product=3)
    ts = int(time.time()) - 5
    got = a.record([{"path": "dining.kcech", "event": "buttonPressed", "value": "1", "timestamp": ts},
                    {"key": "dining.kcech.appear", "timestamp": ts},
                    {"key": "dining.kcech.rating", "value": 4.5, "timestamp": ts}])
    assert got == {"accepted": 3, "stored": 3}
    assert sink.snapshot() == [], "nothing may upload before the push interval or a flush"

    t0 = time.time()
    assert a.flush() == {"sent": 3, "dropped": 0, "remaining": 0, "deferred": None}
    uploads = sink.snapshot()
    assert len(uploads) == 1, [(u.status, u.raw) for u in uploads]
    u = uploads[0]
    assert u.method == "POST" and u.path == "/analytics/"
    assert (u.header("content-type") or "").startswith("application/json")
    expected_auth = {"access_token": f"Bearer {tokens.access}", "jwt": f"Bearer {tokens.id}", "none": None}[credential]
    assert u.header("authorization") == expected_auth
    assert u.header("x-authorization") == expected_auth
    auth_fields = [v for k, v in u.header_list if k.lower() in ("authorization", "x-authorization")]
    assert len(auth_fields) == (0 if expected_auth is None else 2), u.header_list
    assert isinstance(u.body, dict) and set(u.body) == {"product", "pennkey", "timestamp", "data"}, u.raw
    assert u.body["product"] == 3
    assert u.body["pennkey"] == subject
    assert u.body["timestamp"] == ts and isinstance(u.body["timestamp"], int)
    assert u.body["data"] == [
        {"key": key("dining.kcech.event.buttonPressed"), "value": "1"},
        {"key": key("dining.kcech.appear"), "value": "1"},
        {"key": key("dining.kcech.rating"), "value": "4.5"},
    ]
    for item in u.body["data"]:
        assert set(item) == {"key", "value"} and all(isinstance(v, str) for v in item.values())

    m = a.metrics()
    assert m["platform_proxy_analytics_queued_total"] == 3
    assert m["platform_proxy_analytics_sent_total"] == 3
    assert m["platform_proxy_analytics_queue_depth"] == 0
    assert m["platform_proxy_analytics_commits_total"] >= 1
    assert math.floor(t0) <= m["platform_proxy_analytics_last_upload_timestamp_seconds"] <= time.time() + 1
    for reason in ("rejected", "expired", "cap", "duplicate"):
        assert m[f'platform_proxy_analytics_dropped_total{{reason="{reason}"}}'] == 0


def test_batches_hold_one_subject_and_one_second_up_to_max_batch(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxBatch=4)
    t1 = int(time.time()) - 20
    t2 = t1 + 7
    stamps = [t1, t2, t1, t2, t1, t2, t1, t1, t1]  # 6 values in t1, 3 in t2, interleaved
    events = [{"key": f"batch.v{i}", "value": str(i), "timestamp": ts} for i, ts in enumerate(stamps)]
    assert a.record(events)["stored"] == 9

    # Another subject: the value keeps the subject it was recorded under.
    a.tokens.write_id(sub="user-2", pennkey="other", exp=int(time.time()) + 86400)
    a.wait_subject("other")
    assert a.record([{"key": "batch.w0", "value": "w0", "timestamp": t1},
                     {"key": "batch.w1", "value": "w1", "timestamp": t1}])["stored"] == 2

    assert a.flush() == {"sent": 11, "dropped": 0, "remaining": 0, "deferred": None}
    uploads = sink.snapshot()
    assert all(u.status == 200 for u in uploads)
    shapes = sorted((u.body["pennkey"], u.body["timestamp"], len(u.data)) for u in uploads)
    assert shapes == sorted([(PENNKEY, t1, 4), (PENNKEY, t1, 2), (PENNKEY, t2, 3), ("other", t1, 2)]), shapes
    # Every value went out with its own subject and second.
    seen = {(u.body["pennkey"], u.body["timestamp"], k, v) for u in uploads for k, v in u.pairs()}
    expected = {(PENNKEY, ts, key(f"batch.v{i}"), str(i)) for i, ts in enumerate(stamps)}
    expected |= {("other", t1, key("batch.w0"), "w0"), ("other", t1, key("batch.w1"), "w1")}
    assert seen == expected
    assert sum(len(u.data) for u in uploads) == 11


# --------------------------------------------------------------------------- keys


def test_keys_are_root_prefixed_normalised_and_checked(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    longest = "k" * (256 - len(ROOT) - 1)  # exactly 256 bytes once prefixed
    got = a.record([
        {"path": "dining.kcech", "event": "buttonPressed", "value": "1"},
        {"key": "dining.kcech.appear"},
        {"key": f"{ROOT}.home.appear"},                      # already under the root: kept
        {"key": f"{ROOT}x.home"},                            # not under the root (segment-wise)
        {"path": "dining hall.main menu", "event": "button pressed", "value": "x y"},
        {"key": "laundry.room 3.appear", "value": 7},
        {"key": longest},
    ])
    assert got == {"accepted": 7, "stored": 7}

    def rejected(events, index, *fragments):
        r = a.events(events)
        assert r.status == 400, (events, r)
        body = r.json()
        assert body["error"] == "invalid_analytics", body
        assert body["message"].startswith(f"events[{index}]: "), body
        for fragment in fragments:
            assert fragment in body["message"], (fragment, body)

    ok = {"key": "fine.key"}
    rejected([ok, {"key": "dining..kcech"}], 1, "empty segment")
    rejected([ok, ok, {"key": ".dining"}], 2, "starts with")
    rejected([{"key": "dining."}], 0, "ends with")
    rejected([ok, {"path": "dining..x", "event": "tap"}], 1, "empty segment")
    rejected([ok, {"path": "dining", "event": ""}], 1, "event")
    rejected([ok, {"path": "dining", "event": "a.b"}], 1, "event")
    rejected([ok, {"key": longest + "k"}], 1, "257", "256")
    rejected([ok, ok, ok, {"path": "p" * 240, "event": "tapped"}], 3, "256")
    rejected([ok, {"path": "dining"}], 1, "event")
    rejected([ok, {"key": "a", "path": "b", "event": "c"}], 1)

    # The rejected requests stored nothing, not even their valid events.
    assert a.metric("queued_total") == 7
    assert a.flush() == {"sent": 7, "dropped": 0, "remaining": 0, "deferred": None}
    assert sorted(sink.accepted_pairs().elements()) == sorted([
        (key("dining.kcech.event.buttonPressed"), "1"),
        (key("dining.kcech.appear"), "1"),
        (key("home.appear"), "1"),
        (key(f"{ROOT}x.home"), "1"),
        (key("dining_hall.main_menu.event.button_pressed"), "x y"),
        (key("laundry.room_3.appear"), "7"),
        (key(longest), "1"),
    ])
    assert len(key(longest).encode()) == 256


# --------------------------------------------------------------------------- crash safety


def burst(a: Analytics, clients: int, posts: int, per_post: int, tag: str, stop: threading.Event | None = None,
          on_ack=None):
    """``clients`` keep-alive clients each post ``posts`` requests of ``per_post`` distinct events.

    Returns (acked, in_doubt, failures): pairs answered 202, pairs of requests sent without
    an answer (the proxy died), and unexpected answers.
    """
    acked: list[tuple[str, str]] = []
    in_doubt: list[tuple[str, str]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def client(c: int):
        conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
        try:
            for p in range(posts):
                if stop is not None and stop.is_set():
                    return
                events = [{"key": f"{tag}.c{c}.p{p}.e{i}", "value": f"{c}-{p}-{i}"} for i in range(per_post)]
                pairs = [(key(e["key"]), e["value"]) for e in events]
                try:
                    conn.request("POST", "/_platform/analytics/events", body=json.dumps({"events": events}).encode(),
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    body = resp.read()
                except (OSError, http.client.HTTPException) as e:
                    with lock:
                        in_doubt.extend(pairs)
                        if stop is None or not stop.is_set():
                            failures.append(f"client {c} post {p}: {type(e).__name__}: {e}")
                    return
                with lock:
                    if resp.status == 202 and json.loads(body) == {"accepted": per_post, "stored": per_post}:
                        acked.extend(pairs)
                        n = len(acked)
                    else:
                        failures.append(f"client {c} post {p}: {resp.status} {body[:200]!r}")
                        return
                if on_ack is not None:
                    on_ack(n)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "burst clients hung"
    return acked, in_doubt, failures


def check_delivery(sink: AnalyticsSink, acked: list, in_doubt: list) -> dict:
    received = sink.accepted_pairs()
    acked_set = set(acked)
    missing = acked_set - set(received)
    phantom = set(received) - acked_set - set(in_doubt)
    duplicates = sum(n - 1 for n in received.values() if n > 1)
    stats = {"acked": len(acked_set), "received_distinct": len(received), "received_total": sum(received.values()),
             "duplicates": duplicates, "in_doubt_delivered": len(set(in_doubt) & set(received)),
             "in_doubt": len(set(in_doubt))}
    print(f"delivery: {stats}")
    assert not missing, (f"{len(missing)} of {len(acked_set)} acknowledged values never arrived "
                         f"(e.g. {sorted(missing)[:5]}); {stats}")
    assert not phantom, f"values arrived that were never posted: {sorted(phantom)[:5]}"
    return stats


def test_kill_9_right_after_a_burst_of_202s_loses_no_acknowledged_value(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    started = time.monotonic()
    acked, in_doubt, failures = burst(a, clients=20, posts=50, per_post=10, tag="crash")
    last_ack = time.monotonic()
    crash(a)
    killed_after = time.monotonic() - last_ack
    print(f"burst: {len(acked)} values acknowledged in {last_ack - started:.2f}s; kill -9 {killed_after * 1000:.1f} ms "
          f"after the last 202")
    assert not failures, failures[:5]
    assert len(acked) == 20 * 50 * 10 and not in_doubt
    assert sink.snapshot() == [], "the push interval is an hour: nothing may have uploaded before the crash"

    b = restart(start_proxy, a, "after-crash")
    flush_until_empty(b)
    check_delivery(sink, acked, in_doubt)
    assert b.metric("queue_depth") == 0
    assert b.metric("dropped_total", reason="rejected") == 0


def test_kill_9_during_a_burst_loses_no_acknowledged_value(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    stop = threading.Event()
    target = 20 * 25 * 10  # crash about halfway through
    killer_done = threading.Event()

    def on_ack(n):
        if n >= target and not stop.is_set():
            stop.set()
            crash(a)
            killer_done.set()

    acked, in_doubt, failures = burst(a, clients=20, posts=50, per_post=10, tag="midcrash", stop=stop, on_ack=on_ack)
    assert killer_done.is_set(), f"only {len(acked)} values acknowledged; the crash never happened ({failures[:3]})"
    assert not failures, failures[:5]
    print(f"mid-burst crash: {len(acked)} acknowledged, {len(in_doubt)} in doubt")
    assert sink.snapshot() == []

    b = restart(start_proxy, a, "after-crash")
    flush_until_empty(b)
    check_delivery(sink, acked, in_doubt)


# --------------------------------------------------------------------------- retries and drops


def test_503_backs_off_exponentially_then_delivers(start_proxy, sink, tmp_path):
    interval = 1.0
    sink.script([503, 503])
    a = launch(start_proxy, sink, tmp_path, pushIntervalSeconds=interval)
    values = [{"key": f"backoff.v{i}", "value": str(i)} for i in range(5)]
    assert a.record(values)["stored"] == 5

    uploads = sink.wait_for(lambda us: any(u.status == 200 for u in us), timeout=15, what="a 200 after two 503s")
    assert [u.status for u in uploads] == [503, 503, 200]
    assert uploads[0].raw == uploads[1].raw == uploads[2].raw, "the same batch is retried unchanged"
    assert sorted(uploads[2].pairs()) == sorted((key(v["key"]), v["value"]) for v in values)

    deferred = a.server.log_events("analytics_upload_deferred")
    assert len(deferred) == 2 and all("503" in e.get("reason", "") for e in deferred), deferred
    # Exponential from the push interval with jitter in [0.5, 1.5): first wait in
    # [0.5, 1.5) x interval, second in [1, 3) x interval.
    r1, r2 = (e["retryInSeconds"] for e in deferred)
    assert 0.5 * interval - 0.05 <= r1 < 1.5 * interval + 0.05, r1
    assert 1.0 * interval - 0.05 <= r2 < 3.0 * interval + 0.05, r2
    gap1, gap2 = uploads[1].at - uploads[0].at, uploads[2].at - uploads[1].at
    assert gap1 >= r1 - 0.1 and gap2 >= r2 - 0.1, (gap1, r1, gap2, r2)

    # The sink saw the upload before the proxy read its answer: the counters follow the answer.
    m = wait_until(lambda: (m := a.metrics())["platform_proxy_analytics_sent_total"] == 5 and m,
                   what="sent_total 5 after the 200")
    assert m["platform_proxy_analytics_queue_depth"] == 0
    assert m['platform_proxy_analytics_dropped_total{reason="rejected"}'] == 0
    assert sum(sink.accepted_pairs().values()) == 5


def test_retryable_failures_keep_the_batch_and_flush_forces_a_cycle_during_backoff(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, pushIntervalSeconds=60)
    values = [{"key": f"retry.v{i}", "value": str(i)} for i in range(3)]
    assert a.record(values)["stored"] == 3
    # 0: the sink closes the connection without answering (a network failure).
    for status in (503, 500, 401, 408, 429, 0):
        sink.always(status)
        before = len(sink.snapshot())
        rep = a.flush()  # each one forced while the previous failure's backoff (>= 30 s) runs
        attempts = len(sink.snapshot()) - before
        # libcurl may retry a reused connection that died without an answer once, on a fresh one.
        assert attempts == 1 or (status == 0 and attempts == 2), f"{attempts} upload attempts for one flush ({status})"
        assert rep["sent"] == 0 and rep["dropped"] == 0 and rep["remaining"] == 3, (status, rep)
        assert rep["deferred"], (status, rep)
        if status:
            assert str(status) in rep["deferred"], (status, rep)
    sink.always(200)
    assert a.flush() == {"sent": 3, "dropped": 0, "remaining": 0, "deferred": None}
    assert sink.accepted_pairs() == Counter((key(v["key"]), v["value"]) for v in values)
    assert a.metric("dropped_total", reason="rejected") == 0


def test_rejected_batch_is_dropped_while_later_batches_go_through(start_proxy, sink, tmp_path):
    marker = key("poison.marker")
    sink.reject_if(lambda u: any(k == marker for k, _ in u.pairs()), 400)
    a = launch(start_proxy, sink, tmp_path)
    now = int(time.time())
    poison = [{"key": "poison.marker", "timestamp": now - 30}, {"key": "poison.a", "timestamp": now - 30},
              {"key": "poison.b", "timestamp": now - 30}]
    later1 = [{"key": f"later.one.v{i}", "value": str(i), "timestamp": now - 20} for i in range(3)]
    later2 = [{"key": f"later.two.v{i}", "value": str(i), "timestamp": now - 10} for i in range(2)]
    for events in (poison, later1, later2):
        a.record(events)

    assert a.flush() == {"sent": 5, "dropped": 3, "remaining": 0, "deferred": None}
    uploads = sink.snapshot()
    assert [(u.status, u.body["timestamp"]) for u in uploads] == [(400, now - 30), (200, now - 20), (200, now - 10)]
    assert sorted(sink.accepted_pairs()) == sorted((key(e["key"]), e.get("value", "1")) for e in later1 + later2)
    m = a.metrics()
    assert m['platform_proxy_analytics_dropped_total{reason="rejected"}'] == 3
    assert m["platform_proxy_analytics_sent_total"] == 5
    assert m["platform_proxy_analytics_queue_depth"] == 0
    dropped = a.server.log_events("analytics_batch_dropped")
    assert [(e.get("status"), e.get("values")) for e in dropped] == [(400, 3)], dropped

    # The poison batch is gone for good: the next cycle sends nothing.
    assert a.flush() == {"sent": 0, "dropped": 0, "remaining": 0, "deferred": None}
    assert len(sink.snapshot()) == 3


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_an_endpoint_that_redirects_keeps_the_batch_and_says_where_it_points(start_proxy, sink, tmp_path, status):
    """Was: a 3xx fell through to "other 4xx" and the batch was dropped. It is
    not followed either: the batch and its credentials go to the configured endpoint only."""
    sink.script([status])
    a = launch(start_proxy, sink, tmp_path)
    a.record([{"key": "moved.v", "value": "1"}])
    flushed = a.flush()
    assert flushed["sent"] == 0 and flushed["dropped"] == 0 and flushed["remaining"] == 1, flushed
    assert f"HTTP {status}" in (flushed["deferred"] or "") and "analytics.endpoint" in flushed["deferred"], flushed
    assert a.metrics()['platform_proxy_analytics_dropped_total{reason="rejected"}'] == 0
    assert [e.get("status") for e in a.server.log_events("analytics_endpoint_redirected")] == [status]
    assert a.flush() == {"sent": 1, "dropped": 0, "remaining": 0, "deferred": None}
    assert [u.status for u in sink.snapshot()] == [status, 200]


def test_a_redirect_to_a_signed_url_is_named_without_its_query(start_proxy, sink, tmp_path):
    """The reason of a deferred upload quotes where a redirecting endpoint points, and reaches the
    log and the console: a signed URL's query (its signature) and fragment stay out of both."""
    sink.location = "https://uploads.example/v2/ingest?X-Amz-Signature=sig-a1b2c3&X-Amz-Credential=cred-9z#frag-x"
    sink.script([302])
    a = launch(start_proxy, sink, tmp_path)
    a.record([{"key": "moved.v", "value": "1"}])
    deferred = a.flush()["deferred"] or ""
    assert "HTTP 302 to https://uploads.example/v2/ingest;" in deferred, deferred
    state = http_call(a.server.port, "GET", "/_platform/console/state").body.decode()
    assert "https://uploads.example/v2/ingest" in state, state
    for secret in ("sig-a1b2c3", "cred-9z", "frag-x"):
        assert secret not in deferred and secret not in state
        assert secret not in a.server.stderr_text()


# --------------------------------------------------------------------------- pruning and the cap


def test_values_older_than_expire_interval_are_pruned_not_uploaded(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, expireIntervalSeconds=60)
    now = int(time.time())
    old = [{"key": f"old.v{i}", "timestamp": now - 3600 - i} for i in range(4)]
    fresh = [{"key": f"fresh.v{i}", "value": str(i)} for i in range(2)]
    assert a.record(old + fresh) == {"accepted": 6, "stored": 6}
    assert a.flush() == {"sent": 2, "dropped": 0, "remaining": 0, "deferred": None}
    assert sorted(sink.accepted_pairs()) == sorted((key(e["key"]), e["value"]) for e in fresh)
    assert all(not k.startswith(key("old.")) for u in sink.snapshot() for k, _ in u.pairs())
    m = a.metrics()
    assert m['platform_proxy_analytics_dropped_total{reason="expired"}'] == 4
    assert m["platform_proxy_analytics_sent_total"] == 2
    assert m["platform_proxy_analytics_queue_depth"] == 0


def test_values_expired_while_down_are_pruned_at_start(start_proxy, sink, tmp_path):
    # First run keeps values for two hours; they were recorded an hour ago.
    a = launch(start_proxy, sink, tmp_path, expireIntervalSeconds=7200)
    now = int(time.time())
    aged = [{"key": f"aged.v{i}", "timestamp": now - 3600} for i in range(3)]
    recent = [{"key": f"recent.v{i}", "timestamp": now - 5} for i in range(2)]
    assert a.record(aged + recent)["stored"] == 5
    crash(a)
    assert sink.snapshot() == []

    # Restarted with a one-minute expiry: the start-up cycle prunes before it uploads.
    a.config["analytics"]["expireIntervalSeconds"] = 60
    b = restart(start_proxy, a, "restarted")
    # No flush yet: only the start-up cycle can have pruned them.
    wait_until(lambda: b.metric("dropped_total", reason="expired") == 3, timeout=10, what="3 expired at start")
    flush_until_empty(b)
    assert sorted(sink.accepted_pairs()) == sorted((key(e["key"]), "1") for e in recent)
    assert all(not k.startswith(key("aged.")) for u in sink.snapshot() for k, _ in u.pairs())


def test_store_cap_drops_the_oldest_values(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, maxStoredEvents=50)
    for batch in range(8):
        got = a.record([{"key": f"cap.n{batch * 10 + i}", "value": str(batch * 10 + i)} for i in range(10)])
        assert got == {"accepted": 10, "stored": 10}
    assert a.metric("queued_total") == 80
    assert a.flush() == {"sent": 50, "dropped": 0, "remaining": 0, "deferred": None}
    assert sorted(sink.accepted_pairs()) == sorted((key(f"cap.n{i}"), str(i)) for i in range(30, 80))
    m = a.metrics()
    assert m['platform_proxy_analytics_dropped_total{reason="cap"}'] == 30
    assert m["platform_proxy_analytics_queue_depth"] == 0


# --------------------------------------------------------------------------- timed operations


def test_operation_is_found_from_a_child_path_and_records_its_duration(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    op_key = key("testing.operationview.operation.testing")

    sent_begin = time.monotonic()
    r = a.post("operations/begin", {"path": "testing.operationview", "operation": "testing",
                                    "cancelOn": ["background", "inactive"]})
    got_begin = time.monotonic()
    assert r.status == 200 and r.json() == {"key": op_key}, r
    time.sleep(0.4)
    sent_finish = time.monotonic()
    r = a.post("operations/finish", {"path": "testing.operationview.subview", "operation": "testing"})
    got_finish = time.monotonic()
    assert r.status == 202, r
    body = r.json()
    assert body["key"] == op_key and body["accepted"] == 1 and body["stored"] == 1, body
    ms = body["milliseconds"]
    assert isinstance(ms, int)
    # It began between begin's send and reply and ended between finish's send and reply.
    assert math.floor((sent_finish - got_begin) * 1000) - 1 <= ms <= math.ceil((got_finish - sent_begin) * 1000), \
        (ms, sent_finish - got_begin, got_finish - sent_begin)

    r = a.post("operations/finish", {"path": "testing.operationview.subview", "operation": "testing"})
    assert r.status == 404 and r.json()["error"] == "unknown_operation", r

    # The nearest running ancestor wins; then the next one up.
    for path in ("a", "a.b"):
        assert a.post("operations/begin", {"path": path, "operation": "x"}).status == 200
    r1 = a.post("operations/finish", {"path": "a.b.c", "operation": "x"})
    r2 = a.post("operations/finish", {"path": "a.b.c", "operation": "x"})
    assert (r1.status, r1.json()["key"]) == (202, key("a.b.operation.x")), r1
    assert (r2.status, r2.json()["key"]) == (202, key("a.operation.x")), r2

    # Begun with no path: global, found from any path.
    r = a.post("operations/begin", {"operation": "sync"})
    assert r.status == 200 and r.json() == {"key": key("global.operation.sync")}, r
    r = a.post("operations/finish", {"path": "some.deep.view", "operation": "sync"})
    assert r.status == 202 and r.json()["key"] == key("global.operation.sync"), r

    # Cancel: found the same way, records nothing; twice is 404.
    assert a.post("operations/begin", {"path": "booking", "operation": "reserve"}).status == 200
    r = a.post("operations/cancel", {"path": "booking.confirm", "operation": "reserve"})
    assert r.status == 200 and r.json() == {"cancelled": key("booking.operation.reserve")}, r
    r = a.post("operations/cancel", {"path": "booking.confirm", "operation": "reserve"})
    assert r.status == 404 and r.json()["error"] == "unknown_operation", r
    r = a.post("operations/finish", {"path": "booking", "operation": "reserve"})
    assert r.status == 404, r

    assert a.flush()["sent"] == 4
    pairs = sink.accepted_pairs()
    assert pairs[(op_key, str(ms))] == 1, pairs
    assert {k for k, _ in pairs} == {op_key, key("a.b.operation.x"), key("a.operation.x"), key("global.operation.sync")}
    assert all(v.isdigit() for _, v in pairs)


def test_phase_cancels_the_operations_registered_for_it(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    begun = {
        "A": ({"path": "booking", "operation": "reserve", "cancelOn": ["background"]}, key("booking.operation.reserve")),
        "B": ({"path": "booking", "operation": "pay", "cancelOn": ["inactive"]}, key("booking.operation.pay")),
        "C": ({"path": "home", "operation": "load"}, key("home.operation.load")),
        "D": ({"operation": "g", "cancelOn": ["background", "inactive"]}, key("global.operation.g")),
    }
    for body, k in begun.values():
        r = a.post("operations/begin", body)
        assert r.status == 200 and r.json() == {"key": k}, r

    r = a.post("phase", {"phase": "background"})
    assert r.status == 200 and r.json() == {"cancelled": sorted([begun["A"][1], begun["D"][1]])}, r

    def finish(name):
        body = {k: v for k, v in begun[name][0].items() if k != "cancelOn"}
        return a.post("operations/finish", body)

    assert finish("A").status == 404
    assert finish("D").status == 404
    assert finish("B").status == 202
    assert finish("C").status == 202
    r = a.post("phase", {"phase": "inactive"})
    assert r.status == 200 and r.json() == {"cancelled": []}, r
    r = a.post("phase", {"phase": "asleep"})
    assert r.status == 400 and r.json()["error"] == "invalid_analytics", r

    assert a.flush()["sent"] == 2
    assert {k for k, _ in sink.accepted_pairs()} == {begun["B"][1], begun["C"][1]}


# --------------------------------------------------------------------------- de-duplication


def test_repeats_within_the_buffer_interval_are_dropped(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path, bufferIntervalSeconds=5)
    assert a.record([{"key": "home.appear"}] * 3) == {"accepted": 3, "stored": 1}
    assert a.record([{"key": "home.appear"}]) == {"accepted": 1, "stored": 0}
    assert a.record([{"key": "home.a"}, {"key": "home.b"}]) == {"accepted": 2, "stored": 2}
    t = int(time.time()) - 100
    got = a.record([{"key": "feed.refresh", "value": "first", "timestamp": t},
                    {"key": "feed.refresh", "value": "second", "timestamp": t + 2},
                    {"key": "feed.refresh", "value": "third", "timestamp": t + 6}])
    assert got == {"accepted": 3, "stored": 2}

    m = a.metrics()
    assert m['platform_proxy_analytics_dropped_total{reason="duplicate"}'] == 4
    assert m["platform_proxy_analytics_queued_total"] == 5
    assert a.flush()["sent"] == 5
    assert sink.accepted_pairs() == Counter({(key("home.appear"), "1"): 1, (key("home.a"), "1"): 1,
                                             (key("home.b"), "1"): 1, (key("feed.refresh"), "first"): 1,
                                             (key("feed.refresh"), "third"): 1})


# --------------------------------------------------------------------------- login and configuration


def test_a_static_provider_without_an_id_token_gets_a_409_that_says_the_subject_is_missing(start_proxy, sink, tmp_path):
    """Was: logged in (a static access token) but the 409 said "logged out"."""
    tokens = make_tokens(tmp_path / "tokens")
    config = make_config(sink, tmp_path / "state", tokens)
    del config["provider"]["idToken"]
    server = start_proxy(config=config)
    assert server.get("/_platform/auth").json()["loggedIn"] is True
    r = server.request("POST", "/_platform/analytics/events", body=json.dumps({"events": [{"key": "home.appear"}]}).encode())
    assert r.status == 409 and r.json()["error"] == "not_logged_in", r
    assert "no id_token" in r.json()["message"] and "idToken" in r.json()["message"], r.json()


def test_nothing_is_recorded_while_logged_out(start_proxy, sink, tmp_path):
    # The config loader wants the token file readable at start; it goes away afterwards
    # (the static source re-reads it when its stamp changes): logged out, no access token.
    a = launch(start_proxy, sink, tmp_path)
    tokens = a.tokens
    tokens.access_path.unlink()
    wait_until(lambda: a.auth()["state"] == "logged_out", what="logged_out")

    r = a.events([{"key": "home.appear"}])
    assert r.status == 409 and r.json()["error"] == "not_logged_in", r
    assert a.post("operations/begin", {"path": "home", "operation": "load"}).status == 200
    r = a.post("operations/finish", {"path": "home", "operation": "load"})
    assert r.status == 409 and r.json()["error"] == "not_logged_in", r
    m = a.metrics()
    assert m["platform_proxy_analytics_queued_total"] == 0
    assert m["platform_proxy_analytics_commits_total"] == 0
    assert a.flush() == {"sent": 0, "dropped": 0, "remaining": 0, "deferred": None}
    assert sink.snapshot() == []

    # Logging in (the token file appears) is what makes the difference.
    tokens.access_path.write_text(tokens.access)
    a.wait_subject(PENNKEY)
    assert a.record([{"key": "home.appear"}]) == {"accepted": 1, "stored": 1}


def test_analytics_endpoints_are_404_without_analytics_config(start_proxy, tmp_path):
    tokens = make_tokens(tmp_path / "tokens")
    config = base_config(None, provider={"grant": "static", "accessToken": {"file": str(tokens.access_path)},
                                         "idToken": {"file": str(tokens.id_path)}},
                         stateDirectory=str(tmp_path / "state"))
    server = start_proxy(config=config)
    bodies = {"events": {"events": [{"key": "home.appear"}]}, "operations/begin": {"operation": "x"},
              "operations/finish": {"operation": "x"}, "operations/cancel": {"operation": "x"},
              "phase": {"phase": "background"}, "flush": {}}
    for action, body in bodies.items():
        r = http_call(server.port, "POST", f"/_platform/analytics/{action}", json.dumps(body).encode())
        assert r.status == 404, (action, r)
    metrics = http_call(server.port, "GET", "/_platform/metrics")
    assert metrics.status == 200 and b"platform_proxy_analytics_" not in metrics.body
    assert not (tmp_path / "state" / "analytics.sqlite").exists()


# --------------------------------------------------------------------------- shutdown


def test_sigterm_uploads_pending_values(start_proxy, sink, tmp_path):
    a = launch(start_proxy, sink, tmp_path)
    values = [{"key": f"shutdown.v{i}", "value": str(i)} for i in range(5)]
    assert a.record(values)["stored"] == 5
    assert sink.snapshot() == []
    assert a.server.stop() == 0
    assert sink.accepted_pairs() == Counter((key(v["key"]), v["value"]) for v in values)
    assert [e.get("completed") for e in a.server.log_events("analytics_final_upload")] == [True]


def test_sigterm_with_the_endpoint_down_keeps_values_on_disk(start_proxy, sink, tmp_path):
    sink.always(503)
    a = launch(start_proxy, sink, tmp_path)
    values = [{"key": f"kept.v{i}", "value": str(i)} for i in range(4)]
    assert a.record(values)["stored"] == 4
    assert a.server.stop() == 0
    assert [u.status for u in sink.snapshot()] == [503], "one last upload attempt at SIGTERM"

    sink.always(200)
    b = restart(start_proxy, a, "restarted")
    flush_until_empty(b)
    assert sink.accepted_pairs() == Counter((key(v["key"]), v["value"]) for v in values)
