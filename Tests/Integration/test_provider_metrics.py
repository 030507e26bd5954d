"""Per-provider series in ``GET /_platform/metrics``, through the real binary: every configured
provider (static or OAuth, the single ``provider`` labelled ``default``) has
``platform_proxy_provider_logged_in``, ``platform_proxy_provider_state`` and, while logged in
with a known expiry, ``platform_proxy_provider_token_expiry_timestamp_seconds``; a provider that
loses its login (a removed token file, a refused refresh, a logout) reads 0 while the others
stay 1, and token refreshes are counted under the provider that made them. The text is parsed
with the reference parser; no token ever appears in it."""

from __future__ import annotations

import json
import signal
import time

import pytest

from credentials_support import idp_factory, wait_until  # noqa: F401
from test_analytics import unsigned_jwt
from test_metrics import prom_parser, scrape, scrape_until  # noqa: F401
from test_providers import PING_CLIENT, Browser, add_ping_client, providers_state, start_two

STATES = ("logged_in", "logged_out", "awaiting_authorization", "refreshing")


def logged_in(s, provider: str) -> float | None:
    return s.value("platform_proxy_provider_logged_in", provider=provider)


def state_of(s, provider: str) -> str:
    """The one state whose series is 1 (every state has a series)."""
    values = {state: s.value("platform_proxy_provider_state", provider=provider, state=state) for state in STATES}
    assert None not in values.values(), f"{provider}: a state series is missing: {values}\n{s.text}"
    on = [state for state, v in values.items() if v == 1]
    assert len(on) == 1 and sum(values.values()) == 1, f"{provider}: not exactly one state is 1: {values}\n{s.text}"
    return on[0]


def expiry(s, provider: str) -> float | None:
    return s.value("platform_proxy_provider_token_expiry_timestamp_seconds", provider=provider)


def test_two_static_providers_each_have_their_series_and_a_removed_token_file_reads_logged_out(
        start_proxy, main_upstream, tmp_path, prom_parser):
    exp = int(time.time()) + 3600
    a_file, b_id = tmp_path / "a.token", unsigned_jwt({"sub": "svc", "exp": exp})
    a_token, b_token = "token-a-" + "1" * 20, "token-b-" + "2" * 20
    a_file.write_text(a_token + "\n")
    config = {
        "listen": ["127.0.0.1:0"],
        "stateDirectory": str(tmp_path / "state"),
        "providers": {"a": {"grant": "static", "accessToken": {"file": str(a_file)}},
                      "b": {"grant": "static", "accessToken": b_token, "idToken": b_id}},
        "routes": [{"name": "ra", "path": "/a/", "upstream": main_upstream.url("/a/"), "credential": "access_token",
                    "provider": "a"},
                   {"name": "rb", "path": "/b/", "upstream": main_upstream.url("/b/"), "credential": "access_token",
                    "provider": "b"}],
    }
    server = start_proxy(config)
    s = scrape(server, prom_parser)
    for name in ("platform_proxy_provider_logged_in", "platform_proxy_provider_state",
                 "platform_proxy_provider_token_expiry_timestamp_seconds"):
        s.family(name, "gauge")
    assert logged_in(s, "a") == 1 and logged_in(s, "b") == 1, s.text
    assert state_of(s, "a") == "logged_in" and state_of(s, "b") == "logged_in"
    # b's expiry is its id_token's exp; a's token says nothing, so no series (not a 0).
    assert expiry(s, "b") == exp, s.text
    assert expiry(s, "a") is None, s.text
    # only the configured providers, each under its own name
    assert {dict(labels)["provider"] for labels in s.series("platform_proxy_provider_logged_in")} == {"a", "b"}
    for secret in (a_token, b_token, b_id):
        assert secret not in s.text, "a token reached the metrics"

    # a's token file goes away: a reads logged out, b stays logged in.
    a_file.unlink()
    s = scrape_until(server, prom_parser, lambda s: logged_in(s, "a") == 0, timeout=5)
    assert logged_in(s, "a") == 0 and state_of(s, "a") == "logged_out", s.text
    assert logged_in(s, "b") == 1 and state_of(s, "b") == "logged_in", s.text
    assert server.get("/a/x").status == 503 and server.get("/b/x").status == 200  # a: credentials_unavailable


def test_the_single_provider_is_labelled_default(start_proxy, main_upstream, tmp_path, prom_parser):
    config = {
        "listen": ["127.0.0.1:0"],
        "stateDirectory": str(tmp_path / "state"),
        "provider": {"grant": "static", "accessToken": "token-" + "3" * 20},
        "routes": [{"name": "r", "path": "/", "upstream": main_upstream.url("/"), "credential": "access_token"}],
    }
    s = scrape(start_proxy(config), prom_parser)
    assert s.series("platform_proxy_provider_logged_in") == {frozenset({("provider", "default")}): 1}, s.text


@pytest.mark.parametrize("exp", [1e300, 9.3e18, -1e300])
def test_an_expiry_past_the_integer_range_is_scraped_without_stopping_the_proxy(start_proxy, main_upstream, tmp_path,
                                                                                prom_parser, exp):
    # An id_token's exp (or an IdP's expires_in) is any JSON number: a scrape must not trap on it.
    config = {
        "listen": ["127.0.0.1:0"],
        "stateDirectory": str(tmp_path / "state"),
        "provider": {"grant": "static", "accessToken": "token-" + "4" * 20,
                     "idToken": unsigned_jwt({"sub": "svc", "exp": exp})},
        "routes": [{"name": "r", "path": "/", "upstream": main_upstream.url("/"), "credential": "access_token"}],
    }
    server = start_proxy(config)
    for _ in range(2):
        s = scrape(server, prom_parser)
        assert expiry(s, "default") == exp, s.text
    assert server.running and server.get("/_platform/health").status == 200


def test_a_refused_refresh_reads_logged_out_for_that_provider_only_and_refreshes_count_per_provider(
        start_proxy, idp_factory, tmp_path, prom_parser):
    idp = idp_factory(access_ttl=120)
    add_ping_client(idp)
    p = start_two(start_proxy, tmp_path, idp, idp)
    s = scrape(p.server, prom_parser)
    assert logged_in(s, "platform") == 0 and logged_in(s, "ping") == 0, s.text
    assert state_of(s, "platform") == "logged_out" and expiry(s, "platform") is None, s.text

    assert Browser().open(p.base + "/_platform/login").status == 200
    wait_until(lambda: providers_state(p) == {"platform": "logged_in", "ping": "logged_in"}, timeout=5,
               what="both providers logged in")
    s = scrape_until(p.server, prom_parser, lambda s: logged_in(s, "platform") == 1 and logged_in(s, "ping") == 1)
    auth = p.auth()["providers"]
    for name in ("platform", "ping"):
        assert logged_in(s, name) == 1 and state_of(s, name) == "logged_in", s.text
        assert expiry(s, name) == round(auth[name]["expiresAt"]), (auth, s.text)
        assert expiry(s, name) > time.time() + 60, s.text

    # ping's token is refused upstream and its refresh is refused by the IdP; platform refreshes fine.
    tokens = {name: json.loads((p.state_dir / f"tokens-{name}.json").read_text())["access_token"]
              for name in ("platform", "ping")}
    idp.control.expire(tokens["ping"])
    idp.control.fail_refresh(count=1)
    r = p.call("/ping/x")
    assert r.status == 401, r
    idp.control.expire(tokens["platform"])
    assert p.call("/api/x").status == 200  # 401 upstream -> platform refreshes -> one retry

    s = scrape_until(p.server, prom_parser, lambda s: logged_in(s, "ping") == 0
                     and s.get("platform_proxy_token_refreshes_total", provider="platform", outcome="ok") == 1)
    assert logged_in(s, "ping") == 0 and state_of(s, "ping") == "awaiting_authorization", s.text
    assert expiry(s, "ping") is None, s.text
    assert logged_in(s, "platform") == 1 and state_of(s, "platform") == "logged_in", s.text
    refreshes = {(dict(labels)["provider"], dict(labels)["outcome"]): v
                 for labels, v in s.series("platform_proxy_token_refreshes_total").items()}
    assert refreshes == {("platform", "ok"): 1, ("platform", "refused"): 0, ("platform", "unavailable"): 0,
                         ("ping", "ok"): 0, ("ping", "refused"): 1, ("ping", "unavailable"): 0}, s.text
    assert [c["client_id"] for c in idp.control.token_call_log() if c["grant_type"] == "refresh_token"] \
        == [PING_CLIENT, idp.public_client_id]

    # A logout ends platform's login too: both read 0.
    assert p.call("/_platform/logout?provider=platform", method="POST").status == 200
    s = scrape_until(p.server, prom_parser, lambda s: logged_in(s, "platform") == 0)
    assert logged_in(s, "platform") == 0 and state_of(s, "platform") == "logged_out", s.text
    assert expiry(s, "platform") is None, s.text
    for secret in tokens.values():
        assert secret not in s.text, "a token reached the metrics"


def test_a_reload_that_adds_and_removes_static_providers_changes_the_series(start_proxy, main_upstream, tmp_path,
                                                                           prom_parser):
    def config(names):
        return {
            "listen": ["127.0.0.1:0"],
            "stateDirectory": str(tmp_path / "state"),
            "providers": {n: {"grant": "static", "accessToken": f"token-{n}-" + "4" * 20} for n in names},
            "routes": [{"name": f"r{n}", "path": f"/{n}/", "upstream": main_upstream.url("/"),
                        "credential": "access_token", "provider": n} for n in names],
        }

    server = start_proxy(config(["a", "b"]))
    assert set(scrape(server, prom_parser).series("platform_proxy_provider_logged_in").values()) == {1}
    server.config_path.write_text(json.dumps(config(["b", "c"])))
    server.signal(signal.SIGHUP)
    s = scrape_until(server, prom_parser, lambda s: logged_in(s, "c") == 1)
    assert s.series("platform_proxy_provider_logged_in") == {frozenset({("provider", "b")}): 1,
                                                             frozenset({("provider", "c")}): 1}, s.text
