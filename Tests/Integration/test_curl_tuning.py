"""The libcurl tuning's switch (PLATFORM_PROXY_CURL_TUNING) and its start log line, through the
real binary. Every other integration test runs both with the tuning on and, in `make
integration-untuned`, off."""

from __future__ import annotations

import os
import subprocess

import pytest

from proxy import TUNING_SWITCH, base_config, build_request, exchange, require_binary
from test_exchange_faults import RawUpstream, route_to


def tuning_lines(server) -> list[dict]:
    return server.log_events("curl_tuning")


def answer_ok(upstream, conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


@pytest.mark.parametrize("value", ["on", "off"])
def test_the_start_log_says_whether_the_libcurl_tuning_is_on_and_why_not(start_proxy, value):
    """Was: no switch and no word of it. Now one `curl_tuning` line at start: on, with the libcurl
    it serves (this machine's is the verified 7.88.1 with OpenSSL), or off with the reason; and
    requests are forwarded either way."""
    upstream = RawUpstream(answer_ok)
    server = start_proxy(config=base_config(routes=[route_to(upstream.port)]), env={**os.environ, TUNING_SWITCH: value})
    lines = tuning_lines(server)
    assert len(lines) == 1, lines
    if value == "on":
        assert lines[0]["state"] == "on" and "7.88.1" in lines[0]["libcurl"] and "OpenSSL" in lines[0]["libcurl"], lines
    else:
        assert lines[0] == {**lines[0], "state": "off", "reason": f"{TUNING_SWITCH}=off"}, lines
    got = exchange((server.host, server.port), build_request("GET", "/x", {"Host": server.host_header}), timeout=5)
    assert got.status == 200 and got.final.body == b"ok", got.data[:200]
    upstream.close()


def test_a_tuning_switch_other_than_on_or_off_stops_the_start(tmp_path):
    """A typo must not leave the tuning on unnoticed: the start fails, naming the variable."""
    config = tmp_path / "proxy.json"
    config.write_text(__import__("json").dumps(base_config(routes=[route_to(9)])))
    result = subprocess.run([str(require_binary()), "serve", "--config", str(config)], capture_output=True,
                            text=True, timeout=20, stdin=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ, TUNING_SWITCH: "false"})
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert f"{TUNING_SWITCH} must be on or off, not 'false'" in result.stderr, result.stderr[-2000:]
