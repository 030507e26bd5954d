"""`platform-proxy login --journey` against a running proxy and the AM simulator: scripted
with `--answers`, interactive under a pseudo-terminal (the password and the one-time code
are not echoed), and `--resume` of a suspended journey."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import subprocess
import time

import pytest

from credentials_support import assert_no_secrets_logged, idp_factory  # noqa: F401
from journey_support import OTP, PASSWORD, am_state, launch_journey
from proxy import binary_path


def cli(args, config, tmp_path, timeout=30):
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(config))
    return subprocess.run([binary_path(), "login", *args, "--config", str(path)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def answers_file(tmp_path, answers: dict, name="answers.json"):
    path = tmp_path / name
    path.write_text(json.dumps(answers))
    return str(path)


def cli_answers(p, tmp_path, journey: str, answers: dict):
    """``login --journey JOURNEY --answers FILE`` with ``answers`` written to FILE."""
    return cli(["--journey", journey, "--answers", answers_file(tmp_path, answers)], p.config, tmp_path)


def test_cli_journey_from_an_answers_file(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    # Input names win over prompts, and IDToken2 is the code's input too: the password goes in as
    # the code, AM refuses, and from a file the error node ends the run (the same answers would fail again).
    done = cli_answers(p, tmp_path, "OTP", {"User Name": "demo", "IDToken2": PASSWORD, "One Time Password": OTP})
    assert done.returncode == 1, done
    assert "Login failure" in done.stdout, done

    done = cli_answers(p, tmp_path, "OTP", {"User Name": "demo", "Password": PASSWORD, "One Time Password": OTP})
    assert done.returncode == 0, done
    assert "Signed in as demo." in done.stdout and "state: logged_in" in done.stdout, done
    assert "[info] A code was sent to your device." in done.stdout
    for secret in [PASSWORD, OTP] + am_state(idp)["session_tokens"] + idp.control.secrets():
        assert secret not in done.stdout + done.stderr
    assert_no_secrets_logged(idp, [p], extra=[PASSWORD, OTP])


@pytest.mark.parametrize("journey,answers,said", [
    ("OTP", {"User Name": "demo", "Password": PASSWORD},
     'has no answer for the prompt "One Time Password" (input IDToken2, PasswordCallback)'),
    ("Register", {"Username": "newbie", "Password": "short", "Email Address": "n@example.test", "Send me news": False,
                  "Security question": "Your first pet?", "Answer": "Rex"},
     "Password: LENGTH_BASED (min-password-length: 8)"),
], ids=["missing-answer", "policy-failure"])
def test_cli_answers_file_that_cannot_finish_fails_clearly(start_proxy, idp_factory, tmp_path, journey, answers, said):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    done = cli_answers(p, tmp_path, journey, answers)
    assert done.returncode == 1, done
    assert said in done.stdout, done
    assert p.auth()["state"] == "logged_out"


def test_cli_suspended_journey_then_resume(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    suspended = cli_answers(p, tmp_path, "Suspend", {"User Name": "demo", "Password": PASSWORD})
    assert suspended.returncode == 1, suspended
    assert "platform-proxy login --resume URL" in suspended.stdout, suspended
    link = am_state(idp)["links"][-1]
    resumed = cli(["--resume", link], p.config, tmp_path)
    assert resumed.returncode == 0 and "Signed in as demo." in resumed.stdout, resumed


def _read_until(fd, wanted: bytes, seen: bytearray, timeout=15.0) -> bytes:
    """Reads until ``wanted`` appears after what was seen before this call."""
    start = len(seen)
    deadline = time.monotonic() + timeout
    while wanted not in seen[start:]:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {wanted!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            seen += chunk
    return bytes(seen)


@contextlib.contextmanager
def terminal_login(p, tmp_path, *args):
    """``platform-proxy login ARGS`` with a pseudo-terminal as stdin, stdout and stderr; yields
    the process and the terminal's master side (closed, and the process killed if still running, after)."""
    config = tmp_path / "cli-config.json"
    config.write_text(json.dumps(p.config))
    master, slave = pty.openpty()
    proc = subprocess.Popen([binary_path(), "login", *args, "--config", str(config)],
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        yield proc, master
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_cli_journey_in_a_terminal_does_not_echo_the_password_or_code(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    seen = bytearray()
    with terminal_login(p, tmp_path, "--journey", "OTP") as (proc, master):
        # A wrong password first: the error is shown and the step asked again.
        _read_until(master, b"User Name: ", seen)
        os.write(master, b"demo\n")
        _read_until(master, b"Password: ", seen)
        os.write(master, b"not-the-Passw0rd\n")
        mark = len(seen)
        _read_until(master, "Login failure\r\n== Sign In ==\r\nUser Name: ".encode(), seen)
        os.write(master, b"demo\n")
        _read_until(master, b"Password: ", seen)
        os.write(master, PASSWORD.encode() + b"\n")
        _read_until(master, b"One Time Password: ", seen)
        os.write(master, OTP.encode() + b"\n")
        _read_until(master, b"state: logged_in", seen)
        assert proc.wait(timeout=10) == 0
    text = bytes(seen).decode(errors="replace")
    assert "demo" in text[mark:], text  # the user name is echoed as typed
    assert PASSWORD not in text and "not-the-Passw0rd" not in text and OTP not in text, text
    assert "Signed in as demo." in text
    assert p.auth()["state"] == "logged_in"


def test_cli_terminal_lists_choices_and_asks_yes_no_and_numbers(start_proxy, idp_factory, tmp_path):
    idp = idp_factory(access_ttl=120)
    p = launch_journey(start_proxy, idp, tmp_path)
    seen = bytearray()
    with terminal_login(p, tmp_path, "--journey", "Profile") as (proc, master):
        for prompt, typed in [(b"User Name: ", b"demo"), (b"Password: ", PASSWORD.encode()), (b"Nickname: ", b"Dee"),
                              (b"Age: ", b"42"), (b"Share with CRM (y/n): ", b"y"),
                              (b"  1) Save\r\n  2) Cancel\r\nChoose [1-2]: ", b"1")]:
            _read_until(master, prompt, seen)
            os.write(master, typed + b"\n")
        _read_until(master, b"Signed in as demo.", seen)
        assert proc.wait(timeout=10) == 0
    text = bytes(seen).decode(errors="replace")
    assert "Share your profile with the CRM?" in text and PASSWORD not in text, text
