"""Proxy environment variables for upstream calls (docs/forwarding.md).

libcurl honours ``http_proxy`` & co. when one is set at start-up; when none is, the
proxy tells libcurl so once instead of having it read the environment for every
transfer. Both halves are behaviour a user can see, so both are tested here.
"""

from __future__ import annotations

import os
import urllib.request

from proxy import ProxyProcess, base_config
from upstream import Upstream

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                   "no_proxy", "NO_PROXY")


def _get(proxy: ProxyProcess, path: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{proxy.addresses[0]}{path}", timeout=10) as response:
        response.read()
        return response.status


def _config(upstream: Upstream) -> dict:
    return base_config(routes=[{"name": "api", "path": "/api", "upstream": upstream.url("/v1"), "credential": "none"}])


def test_upstream_call_goes_through_http_proxy_named_in_environment(tmp_path, monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with Upstream("backend") as backend, Upstream("forward-proxy") as forward_proxy:
        monkeypatch.setenv("http_proxy", f"http://{forward_proxy.host_port}")
        proxy = ProxyProcess(_config(backend), tmp_path).start()
        try:
            assert _get(proxy, "/api/x") == 200
        finally:
            proxy.stop()
        # The forward proxy got the request in absolute form, for the backend; the backend
        # itself saw nothing (the forward proxy here answers by itself).
        records = forward_proxy.records
        assert len(records) == 1, forward_proxy.dump()
        assert records[0].target == f"{backend.url('/v1/x')}", records[0]
        assert backend.records == []


def test_upstream_call_is_direct_without_proxy_variables(tmp_path, monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with Upstream("backend") as backend:
        proxy = ProxyProcess(_config(backend), tmp_path).start()
        try:
            assert _get(proxy, "/api/x") == 200
            assert _get(proxy, "/api/y") == 200
        finally:
            proxy.stop()
        assert [r.target for r in backend.records] == ["/v1/x", "/v1/y"]
