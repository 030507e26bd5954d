"""Fixtures: start the real platform-proxy binary on an ephemeral loopback port.

Run with ``python3 -m pytest Tests/Integration -q`` after ``swift build``
(or set PLATFORM_PROXY_BIN). Each server's config and stderr log live in the
test's temporary directory; a failing test's report ends with the log's tail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probes import PROBE_RESULTS  # noqa: E402
from proxy import ProxyProcess, base_config, binary_path, require_binary, write_mock_dir  # noqa: E402

PROBE_OUTCOMES_PATH = Path(__file__).resolve().parent / ".probe-outcomes.json"


MOCK_FILES = {
    "index": {"mock": "index"},
    "a": {"mock": "a", "pad": "a" * 10},
    "b": {"mock": "b", "pad": "b" * 200},
    "c": {"mock": "c"},
    "path": {"mock": "path"},
}

_servers_key = pytest.StashKey[list]()


def _require_binary_or_fail():
    try:
        require_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def start_proxy(request, tmp_path_factory):
    """Factory: ``start_proxy(config=None, name="proxy", env=None, **overrides) -> ProxyProcess``.

    Without ``config`` it serves a mock route at "/" from MOCK_FILES
    (``index.json``, ``a.json`` ...). ``overrides`` are top-level keys;
    ``limits={...}`` is merged. Every server is stopped with SIGTERM at teardown
    and must exit 0 unless the test set ``server.expected_exit_code = None``.
    """
    _require_binary_or_fail()
    started: list[ProxyProcess] = []
    request.node.stash[_servers_key] = started

    def _start(config: dict | None = None, name: str = "proxy", env: dict | None = None,
               **overrides) -> ProxyProcess:
        workdir = tmp_path_factory.mktemp(f"{request.node.name[:40]}-{name}")
        if config is None:
            mock_dir = write_mock_dir(workdir / "mock", MOCK_FILES)
            config = base_config(mock_dir, **overrides)
        server = ProxyProcess(config, workdir, name, env)
        server.expected_exit_code = 0
        started.append(server)
        server.start()
        return server

    yield _start

    problems = []
    for server in started:
        try:
            code = server.stop()
        except AssertionError as e:
            problems.append(str(e))
            continue
        if server.expected_exit_code is not None and code != server.expected_exit_code:
            problems.append(f"{server.name} exited {code} after SIGTERM (expected "
                            f"{server.expected_exit_code}); log: {server.log_path}")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def proxy(start_proxy) -> ProxyProcess:
    """The default server: mock route at "/", default limits."""
    return start_proxy()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        servers = list(item.stash.get(_servers_key, []))
        for value in getattr(item, "funcargs", {}).values():  # e.g. the module-scoped probe server
            server = getattr(value, "server", None)
            if isinstance(server, ProxyProcess) and server not in servers:
                servers.append(server)
        for server in servers:
            tail = "\n".join(server.stderr_text().splitlines()[-40:])
            report.sections.append((f"platform-proxy stderr ({server.log_path})", tail))
            foreign = server.foreign_signals()
            if foreign:
                report.sections.append(("platform-proxy was signalled by someone else", (
                    f"{server.name} (pid {server.pid}) logged {foreign} but the harness sent only "
                    f"{server.signals_sent}: another process (pkill/killall by name?) stopped it.")))


def pytest_report_header(config):
    return f"platform-proxy binary: {binary_path()}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not PROBE_RESULTS:
        return
    tr = terminalreporter
    results = PROBE_RESULTS
    n = len(results)
    passed = sum(1 for r in results.values() if r["verdict"] == "pass")
    warned = sum(1 for r in results.values() if r["verdict"] == "warn")
    failed = n - passed - warned
    tr.section("Http11Probe outcomes")
    width = max(len(i) for i in results)
    for pid, r in results.items():
        mark = {"pass": " ", "warn": "W", "fail": "F"}[r["verdict"]]
        tr.write_line(f"{mark} {pid:<{width}}  {r['expected']:<32}  {r['outcome']}")
    for pid, r in results.items():
        if r["verdict"] == "warn":
            tr.write_line(f"warning: {pid}: expected {r['expected']!r}, got {r['outcome']} (a warn outcome)")
    payload = {
        "target": results[next(iter(results))].get("target"),
        "summary": {"cases": n, "pass": passed, "warn": warned, "fail": failed},
        "cases": results,
    }
    PROBE_OUTCOMES_PATH.write_text(json.dumps(payload, indent=2) + "\n")
    tr.write_line(f"probe outcomes: {n} cases, {passed} pass, {warned} warn, {failed} fail "
                  f"(written to {PROBE_OUTCOMES_PATH})")


# --------------------------------------------------------------------------- test upstreams
# Recording HTTP/1.1 upstreams (upstream.py); a test that takes one gets it started and stopped,
# and fails if the upstream itself saw an error.

from upstream import Upstream  # noqa: E402


def _upstream(label: str):
    up = Upstream(label).start()
    yield up
    up.stop()
    assert not up.errors, f"test upstream errors: {up.errors}"


@pytest.fixture
def main_upstream():
    yield from _upstream("main")


@pytest.fixture
def foreign_upstream():
    yield from _upstream("foreign")


@pytest.fixture
def other_upstream():
    yield from _upstream("other")
