"""The probe harness itself: vectors load, payload repairs match, the
``expected`` grammar grades outcomes as the vectors mean. No server needed."""

from __future__ import annotations

import pytest

from probes import (FAIL, PASS, WARN, Expectation, NetRandom, Outcome, check_repairs, classify,
                    expectation_for, load_probes)
from proxy import Exchange, parse_response

PROBES = load_probes()


def status(code: int, closed: bool = False) -> Outcome:
    return Outcome("status", code, closed, "")


CLOSE = Outcome("close", None, True, "")
TIMEOUT = Outcome("timeout", None, False, "")


def test_vectors_hold_143_uniquely_named_probes():
    assert len(PROBES) == 143
    assert len({p.id for p in PROBES}) == 143


def test_every_expected_string_parses():
    for probe in PROBES:
        expectation_for(probe)  # raises on an unknown atom


def test_repaired_payloads_match_their_json_display_copy():
    assert check_repairs(PROBES) == []


def test_dotnet_random_matches_known_sequence():
    # System.Random(42).Next() begins 1434747710, 302596119 (.NET legacy seeded algorithm)
    rng = NetRandom(42)
    assert [rng._sample() for _ in range(2)] == [1434747710, 302596119]


def test_host_is_replaced_everywhere_including_absolute_form():
    probe = next(p for p in PROBES if p.id == "COMP-ABSOLUTE-FORM")
    assert probe.payload("127.0.0.1:5") == b"GET http://127.0.0.1:5/ HTTP/1.1\r\nHost: 127.0.0.1:5\r\n\r\n"


@pytest.mark.parametrize("text,outcome,verdict", [
    ("2xx", status(200), PASS),
    ("2xx", status(404), FAIL),
    ("2xx", CLOSE, FAIL),
    ("400", status(400, True), PASS),
    ("400", CLOSE, FAIL),
    ("400 or close", CLOSE, PASS),
    ("400 or close", TIMEOUT, FAIL),
    ("400 or close", status(413), FAIL),
    ("400/close/timeout", TIMEOUT, PASS),
    ("400/close/timeout", status(408), FAIL),
    ("400 or 2xx", status(204), PASS),
    ("400 or 2xx/404", status(404), PASS),
    ("400 or 2xx/404", status(403), FAIL),
    ("400 or close (pass), 2xx (warn)", status(200), WARN),
    ("400 or close (pass), 2xx (warn)", CLOSE, PASS),
    ("400 or close (pass), 2xx (warn)", status(400), PASS),
    ("400 or close (pass), 2xx (warn)", TIMEOUT, FAIL),
    ("2xx + close", status(200, closed=True), PASS),
    ("2xx + close", status(200, closed=False), FAIL),
    ("2xx + close", CLOSE, FAIL),
    ("!101", status(101), FAIL),
    ("!101", status(200), PASS),
    ("!101", status(400), PASS),
    ("!101", CLOSE, PASS),
    ("!101", TIMEOUT, FAIL),
    ("400/505 or close", status(505), PASS),
    ("417 or 2xx", status(417), PASS),
    ("200/206/400/416", status(206), PASS),
    ("200/206/400/416", status(201), FAIL),
    ("400/505/close/timeout", TIMEOUT, PASS),
])
def test_expected_grammar(text, outcome, verdict):
    assert Expectation(text).verdict(outcome) == verdict


def test_upstream_extra_accepts_apply():
    probe = next(p for p in PROBES if p.id == "MAL-POST-CL-HUGE-NO-BODY")
    assert expectation_for(probe).verdict(status(413)) == PASS


def _ex(data=b"", outcome="close", closed=True, closed_after=0.01, first=None, method="GET"):
    ex = Exchange(data, outcome, 0.5, first, closed, closed_after)
    if data:
        ex.responses = [parse_response(data, method, eof=closed)[0]]
    return ex


def test_a_close_when_the_header_timer_fires_is_a_timeout():
    assert classify(_ex(closed_after=1.0), timer_after=0.8).kind == "timeout"
    assert classify(_ex(closed_after=0.01), timer_after=0.8).kind == "close"
    assert classify(_ex(closed_after=1.0), timer_after=None).kind == "close"


def test_a_late_408_is_a_timeout_and_an_early_one_a_status():
    data = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"
    assert classify(_ex(data, "response", first=1.0), 0.8).kind == "timeout"
    assert classify(_ex(data, "response", first=0.01), 0.8).status == 408


def test_interim_100_is_skipped_for_the_final_status():
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    ex = Exchange(data, "response", 0.1, 0.01, False, None)
    from proxy import _parse_all
    ex.responses = _parse_all(data, "POST", eof=False)[0]
    out = classify(ex, 0.8)
    assert (out.kind, out.status) == ("status", 200)
