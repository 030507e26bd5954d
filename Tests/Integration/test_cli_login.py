"""The `login`, `status` and `logout` commands against a running proxy and the real Authlib IdP:
the CLI prints the login URL, waits on the event stream, and never prints a secret."""

from __future__ import annotations

import json
import os
import subprocess
import time

from credentials_support import assert_no_secrets_logged, browser_login, idp_factory, launch  # noqa: F401
from proxy import binary_path


def run_cli(args: list[str], config: dict, tmp_path, timeout: float = 30) -> subprocess.CompletedProcess:
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(config))
    return subprocess.run([binary_path(), *args, "--config", str(path)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_cli_status_login_and_logout_drive_the_running_proxy(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)

    status = run_cli(["status"], p.config, tmp_path)
    assert status.returncode == 1, status
    assert "state: logged_out" in status.stdout

    # `login` prints the URL and waits for logged_in on the event stream; a "browser" completes it.
    waiting = subprocess.Popen([binary_path(), "login", "--config", str(tmp_path / "cli-config.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        first = waiting.stdout.readline()
        assert "Open this URL" in first, first
        url = waiting.stdout.readline().strip()
        assert url == f"{p.base}/_platform/login", url
        time.sleep(0.3)  # let it subscribe to the event stream
        trace = browser_login(p)
        assert trace.callback_reply.status == 200, trace.callback_reply
        out, err = waiting.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, (out, err)
    assert "state: logged_in" in out and "subject: testuser" in out, out

    status = run_cli(["status"], p.config, tmp_path)
    assert status.returncode == 0 and "state: logged_in" in status.stdout, status

    logout = run_cli(["logout"], p.config, tmp_path)
    assert logout.returncode == 0 and "revoked: yes" in logout.stdout, logout
    assert p.auth()["state"] == "logged_out"
    assert len(idp.control.revocations()) >= 1

    for output in (status.stdout, logout.stdout, out):
        for secret in idp.control.secrets():
            assert secret not in output
    assert_no_secrets_logged(idp, [p])


def test_cli_status_reports_an_unreachable_proxy(tmp_path):
    config = {"listen": ["127.0.0.1:9"], "routes": []}
    status = run_cli(["status"], config, tmp_path)
    assert status.returncode == 2 and "not reachable" in status.stdout, status


def _device_login_cli(p, tmp_path) -> subprocess.Popen:
    (tmp_path / "cli-config.json").write_text(json.dumps(p.config))
    cli = subprocess.Popen([binary_path(), "login", "--device", "--config", str(tmp_path / "cli-config.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    first = cli.stdout.readline()
    assert "enter the code" in first, first
    return cli


def test_login_device_ends_with_status_1_and_the_reason_when_the_user_refuses_or_it_expires(
        start_proxy, idp_factory, tmp_path):
    """Was: the proxy only logged the refusal or expiry, so
    `login --device` waited its full 600 s and /_platform/auth showed no lastError."""
    idp = idp_factory(access_ttl=120)
    p = launch(start_proxy, idp, tmp_path)
    for attempt in ("refused", "refused again", "expired"):
        if attempt == "expired":
            idp.control.set_ttl(device_expires=2)
        cli = _device_login_cli(p, tmp_path)
        try:
            time.sleep(0.5)
            if attempt != "expired":
                idp.control.approve_device(approve=False)
            out, _ = cli.communicate(timeout=15)
        finally:
            if cli.poll() is None:
                cli.kill()
        reason = "expired" if attempt == "expired" else "access_denied"
        assert cli.returncode == 1 and "Not signed in:" in out and reason in out, (attempt, out)
        auth = p.auth()
        assert auth["loggedIn"] is False and reason in (auth["lastError"] or ""), auth


def test_cli_commands_need_only_the_address_and_key_and_say_when_refused_or_unreachable(start_proxy, tmp_path):
    """Was: `status` demanded every secret the config names (a client secret
    only the service's environment holds); a wrong key printed `state: ?`; `login` with no proxy
    printed the login URL and exited 1, not 2."""
    from credentials_support import free_port
    from proxy import base_config

    server = start_proxy(config=base_config(None, apiKey="the-right-key-0123456789",
                                            provider={"grant": "static", "accessToken": "tok-static-abcdef"}))
    cli_config = dict(server.config, listen=[server.address],
                      providers={"svc": {"grant": "client_credentials", "clientID": "c",
                                         "clientSecret": {"env": "PP_TEST_SECRET_NOT_IN_THIS_SHELL"},
                                         "tokenEndpoint": "http://127.0.0.1:9/token"}})
    del cli_config["provider"]
    status = run_cli(["status"], dict(cli_config, apiKey="the-right-key-0123456789"), tmp_path)
    assert status.returncode == 0 and "PP_TEST_SECRET" not in status.stdout + status.stderr, status
    for key in ("a-wrong-key-0123456789ab", None):
        config = dict(cli_config, apiKey=key) if key else {k: v for k, v in cli_config.items() if k != "apiKey"}
        for command in (["status"], ["login"]):
            r = run_cli(command, config, tmp_path)
            assert r.returncode == 2 and "refused (HTTP 401)" in r.stdout and "X-Proxy-Key" in r.stdout, (command, r)
            assert "state: ?" not in r.stdout and "Open this URL" not in r.stdout, r.stdout
    gone = dict(cli_config, listen=[f"127.0.0.1:{free_port()}"], apiKey="the-right-key-0123456789")
    r = run_cli(["login"], gone, tmp_path)
    assert r.returncode == 2 and "not reachable" in r.stdout and "Open this URL" not in r.stdout, r


def test_cli_status_prints_an_expiry_past_the_integer_range(start_proxy, tmp_path):
    # An id_token's exp is any JSON number: `status` (one provider, and the table of several)
    # must print it rather than trap converting it to an integer.
    import base64

    from proxy import base_config

    def unsigned_jwt(claims: dict) -> str:
        part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
        return part({"alg": "none"}) + "." + part(claims) + "."

    for exp in (1e300, -1e300, 9.3e18):
        provider = {"grant": "static", "accessToken": "tok-static-abcdef", "idToken": unsigned_jwt({"sub": "s", "exp": exp})}
        for config in (base_config(None, provider=provider),
                       base_config(None, providers={"a": provider, "b": dict(provider)})):
            server = start_proxy(config=config)
            status = run_cli(["status"], dict(config, listen=[server.address]), tmp_path)
            assert status.returncode == 0 and "logged_in" in status.stdout, (exp, status)
            server.stop()
