"""401 refresh storms are bounded, against the real binary and the Authlib
IdP: a route whose upstream always answers 401 makes at most one refresh per
``minRefreshIntervalSeconds``, however many requests (or cross-site pages) drive it.
"""

from __future__ import annotations

import re
import time

from credentials_support import (  # noqa: F401  (fixtures)
    assert_no_secrets_logged,
    idp_factory,
    launch,
    login,
    routes_for,
)
from test_credentials_refresh import burst, refreshes, statuses


def always_401_routes(idp) -> list[dict]:
    # The IdP's resource takes access tokens only: an injected id_token is refused every time.
    return routes_for(idp) + [{"name": "always401", "path": "/always401/", "upstream": idp.issuer + "/api/",
                               "credential": "jwt", "retryOn401": True, "timeoutSeconds": 10}]


def suppressed(p) -> int:
    text = p.call("/_platform/metrics").body.decode()
    m = re.search(r"^platform_proxy_token_refreshes_suppressed_total\{provider=\"default\"\} (\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def test_401_storm_with_a_young_token_refreshes_nothing(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    # The default minRefreshIntervalSeconds (30) is in force; the token was just obtained.
    p = launch(start_proxy, idp, tmp_path, routes=always_401_routes(idp), refresh_before=30,
               provider_extra={"minRefreshIntervalSeconds": None})
    login(p)
    idp.control.reset()
    replies = burst(p, 50, "/always401/x")
    assert statuses(replies) == {401: 50}, statuses(replies)
    assert refreshes(idp) == 0, idp.control.token_call_log()
    assert suppressed(p) >= 50
    assert p.auth()["state"] == "logged_in"
    assert_no_secrets_logged(idp, [p])


def test_401_storm_refreshes_at_most_once_per_interval(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=300)
    p = launch(start_proxy, idp, tmp_path, routes=always_401_routes(idp), refresh_before=30,
               provider_extra={"minRefreshIntervalSeconds": 2})
    login(p)
    time.sleep(2.5)  # the login's token is now old enough for one refresh
    idp.control.reset()
    first = burst(p, 25, "/always401/a")
    second = [p.call(f"/always401/b{i}") for i in range(25)]
    assert statuses(first) == {401: 25} and statuses(second) == {401: 25}
    assert refreshes(idp) == 1, f"one refresh per interval: {idp.control.token_call_log()}"
    assert suppressed(p) >= 25
    time.sleep(2.5)
    assert p.call("/always401/c").status == 401
    assert refreshes(idp) == 2, "a new interval allows one more refresh"
