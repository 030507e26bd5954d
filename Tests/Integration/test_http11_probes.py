"""All 143 Http11Probe requests (RFC 9112 edge cases, smuggling, malformed input)
against the real server, each on a fresh connection, graded by its ``expected``.

The server runs with 1-second header and idle timeouts, so a request the
server waits on ends within the 2-second read window. A silent close that only
happens when that timer fires counts as ``timeout``, not ``close``: a ``close``
must be the server's answer to the bytes.

PROBE_TARGET=host:port runs the suite against some other server (nginx, say)
instead of platform-proxy, to compare.
"""

from __future__ import annotations

import os
import time

import pytest

from probes import FAIL, PROBE_RESULTS, VECTORS_PATH, WARN, classify, expectation_for, load_probes
from proxy import ProxyProcess, base_config, exchange, require_binary, write_mock_dir

if not VECTORS_PATH.exists():
    pytest.fail(f"probe vectors not found at {VECTORS_PATH} (they ship in Tests/Integration/vectors/)",
                pytrace=False)

PROBES = load_probes()
HEADER_TIMEOUT = 1.0
READ_TIMEOUT = 2.0
TIMER_AFTER = 0.8 * HEADER_TIMEOUT  # a silent close this late is the timer, not a verdict

# "/" and "/path" (the fragment probe, once the fragment is dropped) answer 200.
PROBE_MOCK_FILES = {"index": {"status": "ok"}, "path": {"status": "ok"}}


class Target:
    def __init__(self, host: str, port: int, timer_after: float | None, name: str,
                 server: ProxyProcess | None = None):
        self.host, self.port, self.timer_after, self.name = host, port, timer_after, name
        self.server = server  # None for an external PROBE_TARGET

    def assert_alive(self, when: str) -> None:
        if self.server is not None and not self.server.running:
            foreign = self.server.foreign_signals()
            pytest.fail(f"the probe server is not running {when} (exit code {self.server.proc.returncode}; "
                        f"a negative code is the signal that ended it); log: {self.server.log_path}"
                        + (f"\n  it logged {foreign} without the harness signalling it: another process "
                           "stopped it (pkill/killall by name?)" if foreign else ""),
                        pytrace=False)

    @property
    def host_header(self) -> str:
        return f"{self.host}:{self.port}"


@pytest.fixture(scope="module")
def probe_target(tmp_path_factory):
    external = os.environ.get("PROBE_TARGET")
    if external:
        host, _, port = external.rpartition(":")
        after = os.environ.get("PROBE_TIMER_AFTER")
        yield Target(host, int(port), float(after) if after else None, external)
        return
    try:
        require_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    workdir = tmp_path_factory.mktemp("http11probe")
    mock_dir = write_mock_dir(workdir / "mock", PROBE_MOCK_FILES)
    config = base_config(mock_dir, limits={"headerTimeoutSeconds": HEADER_TIMEOUT,
                                           "idleTimeoutSeconds": HEADER_TIMEOUT})
    server = ProxyProcess(config, workdir, "probe-server").start()
    try:
        yield Target(server.host, server.port, TIMER_AFTER, f"platform-proxy {server.address}", server)
    finally:
        code = server.stop()
    assert code == 0, f"probe server exited {code} after SIGTERM; log: {server.log_path}"


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_http11_probe(probe, probe_target):
    expectation = expectation_for(probe)
    payload = probe.payload(probe_target.host_header)
    probe_target.assert_alive("before this probe (an earlier one, or something else, stopped it)")
    ex = exchange((probe_target.host, probe_target.port), payload, timeout=READ_TIMEOUT,
                  close_wait=1.0 if expectation.needs_close else 0.1)
    time.sleep(0.01)
    # a crash looks like "close" to the client; it is never a pass
    probe_target.assert_alive(f"after {probe.id} (sent {payload[:120]!r})")
    outcome = classify(ex, probe_target.timer_after)
    verdict = expectation.verdict(outcome)
    PROBE_RESULTS[probe.id] = {
        "target": probe_target.name,
        "expected": probe.expected,
        "scored": probe.scored,
        "outcome": outcome.label,
        "verdict": verdict,
        "two_outcome": expectation.is_two_outcome(),
        "detail": outcome.detail,
        "sent_bytes": len(payload),
        "send_error": ex.send_error,
    }
    sent = payload[:300] + (b"..." if len(payload) > 300 else b"")
    message = (f"{probe.id}: expected {probe.expected!r}, got {outcome.label}\n"
               f"  description: {probe.description}\n"
               f"  sent ({len(payload)} bytes): {sent!r}\n"
               f"  came back: {outcome.detail}"
               + (f"\n  send failed: {ex.send_error}" if ex.send_error else ""))
    if verdict == WARN:
        print(f"WARN {message}")
    assert verdict != FAIL, message
