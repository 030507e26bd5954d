"""The Http11Probe vectors (vectors/http11probe.json, MIT licence beside it) and their verdicts.

``load_probes`` reads the 143 entries and turns each ``rawRequest`` into the bytes
the upstream project really sends (see ``REPAIRS``); ``Expectation`` interprets
the ``expected`` grammar; ``classify`` turns an ``Exchange`` into an outcome
(a status, ``close`` or ``timeout``) and ``Expectation.verdict`` grades it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from proxy import VECTORS_DIR, Exchange

VECTORS_PATH = VECTORS_DIR / "http11probe.json"
VECTOR_HOST = b"localhost:8080"

PASS, WARN, FAIL = "pass", "warn", "fail"

# Filled by test_http11_probes.py (id -> expected, outcome, verdict, detail ...);
# conftest prints it and writes .probe-outcomes.json at the end of the session.
PROBE_RESULTS: dict[str, dict] = {}


# --------------------------------------------------------------------------- payloads


class NetRandom:
    """.NET's seeded ``System.Random`` (Knuth's subtractive generator).

    MAL-BINARY-GARBAGE is ``new Random(42).NextBytes(256)`` upstream; the JSON
    keeps only its ASCII bytes (the rest became '?'), so regenerate it.
    """

    MBIG = 2147483647
    MSEED = 161803398

    def __init__(self, seed: int):
        sa = [0] * 56
        mj = self.MSEED - (self.MBIG if seed == -(2**31) else abs(seed))
        sa[55] = mj
        mk = 1
        for i in range(1, 55):
            ii = (21 * i) % 55
            sa[ii] = mk
            mk = mj - mk
            if mk < 0:
                mk += self.MBIG
            mj = sa[ii]
        for _ in range(4):
            for i in range(1, 56):
                v = sa[i] - sa[1 + (i + 30) % 55]
                v = (v + 2**31) % 2**32 - 2**31  # Int32 wrap-around
                sa[i] = v + self.MBIG if v < 0 else v
        self.sa, self.inext, self.inextp = sa, 0, 21

    def _sample(self) -> int:
        self.inext = 1 if self.inext + 1 >= 56 else self.inext + 1
        self.inextp = 1 if self.inextp + 1 >= 56 else self.inextp + 1
        r = self.sa[self.inext] - self.sa[self.inextp]
        if r == self.MBIG:
            r -= 1
        if r < 0:
            r += self.MBIG
        self.sa[self.inext] = r
        return r

    def next_bytes(self, n: int) -> bytes:
        return bytes(self._sample() & 0xFF for _ in range(n))


# The JSON is a display copy of Http11Probe's payloads: requests over 8,192 bytes
# are cut at 8,192 and bytes >= 0x80 became '?'. These rebuild the exact bytes
# from the upstream PayloadFactory code (src/Http11Probe/TestCases/Suites/
# MalformedInputSuite.cs); ``check_repairs`` proves each still matches the JSON.
REPAIRS = {
    "MAL-BINARY-GARBAGE": lambda h: NetRandom(42).next_bytes(256),
    "MAL-LONG-URL": lambda h: b"GET /" + b"A" * 100_000 + b" HTTP/1.1\r\nHost: " + h + b"\r\n\r\n",
    "MAL-LONG-HEADER-VALUE": lambda h: b"GET / HTTP/1.1\r\nHost: " + h + b"\r\nX-Big: " + b"B" * 100_000 + b"\r\n\r\n",
    "MAL-MANY-HEADERS": lambda h: b"GET / HTTP/1.1\r\nHost: " + h + b"\r\n"
    + b"".join(b"X-H-%d: value\r\n" % i for i in range(10_000)) + b"\r\n",
    "MAL-LONG-HEADER-NAME": lambda h: b"GET / HTTP/1.1\r\nHost: " + h + b"\r\n" + b"A" * 100_000 + b": val\r\n\r\n",
    "MAL-LONG-METHOD": lambda h: b"A" * 100_000 + b" / HTTP/1.1\r\nHost: " + h + b"\r\n\r\n",
    "MAL-NON-ASCII-HEADER-NAME": lambda h: b"GET / HTTP/1.1\r\nHost: " + h + b"\r\nX-T\xc3\xabst: value\r\n\r\n",
    "MAL-NON-ASCII-URL": lambda h: b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: " + h + b"\r\n\r\n",
    "MAL-URL-OVERLONG-UTF8": lambda h: b"GET /\xc0\xaf HTTP/1.1\r\nHost: " + h + b"\r\n\r\n",
    "MAL-CHUNK-EXT-64K": lambda h: b"POST / HTTP/1.1\r\nHost: " + h
    + b"\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=" + b"a" * 65_536 + b"\r\nhello\r\n0\r\n\r\n",
}
# MAL-CONTROL-CHARS-HEADER needs no repair: upstream's C# literal "\x0Bdef" is
# U+0BDE followed by "f", which Encoding.ASCII really sends as '?'.


def display_form(payload: bytes) -> str:
    """How Http11Probe shows a payload: ASCII with '?' for bytes >= 0x80, cut at 8,192."""
    return "".join(chr(b) if b < 0x80 else "?" for b in payload[:8192])


@dataclass
class Probe:
    id: str
    category: str
    expected: str
    scored: bool
    description: str
    raw_request: str  # as in the JSON

    def payload(self, host_header: str) -> bytes:
        """The bytes to send, with the vectors' Host (localhost:8080) replaced."""
        host = host_header.encode("ascii")
        if self.id in REPAIRS:
            return REPAIRS[self.id](host)
        return self.raw_request.encode("latin-1").replace(VECTOR_HOST, host)


def load_probes(path: Path = VECTORS_PATH) -> list[Probe]:
    entries = json.loads(Path(path).read_text())
    return [Probe(e["id"], e["category"], e["expected"], bool(e["scored"]), e["description"], e["rawRequest"])
            for e in entries]


def check_repairs(probes: list[Probe]) -> list[str]:
    """Problems found comparing each repaired payload with its JSON display copy."""
    problems = []
    by_id = {p.id: p for p in probes}
    for pid in REPAIRS:
        if pid not in by_id:
            problems.append(f"{pid}: not in the vectors")
            continue
        shown = display_form(by_id[pid].payload(VECTOR_HOST.decode()))
        if shown != by_id[pid].raw_request:
            problems.append(f"{pid}: repaired payload does not match the JSON copy")
    return problems


# --------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    kind: str                # "status" | "close" | "timeout" | "garbage"
    status: int | None       # final status for kind == "status"
    closed_after_response: bool
    detail: str              # one human line: what came back and when

    @property
    def label(self) -> str:
        if self.kind == "status":
            return f"{self.status}" + (" +close" if self.closed_after_response else "")
        return self.kind


def classify(ex: Exchange, timer_after: float | None) -> Outcome:
    """Name what the server did.

    ``timer_after``: seconds after which a close (or a 408) with no earlier
    response is the server's header/idle timer firing rather than a decision
    about the bytes; counted as ``timeout`` (None: every close is a close).
    """
    fired_by_timer = lambda t: timer_after is not None and t is not None and t >= timer_after  # noqa: E731
    interim = [r.status for r in ex.responses if 100 <= r.status < 200 and r.status != 101]
    final = ex.final
    when = f"{ex.first_byte_after:.3f}s" if ex.first_byte_after is not None else "-"
    if ex.outcome == "response":
        if final is None:
            return Outcome("garbage", None, ex.closed,
                           f"unparseable response after {when}: {ex.data[:200]!r}"
                           + (f" ({ex.parse_error})" if ex.parse_error else ""))
        closed_after = ex.closed
        detail = (f"{' + '.join(map(str, interim + [final.status]))} {final.reason!r} after {when}"
                  + (f", then closed at {ex.closed_after:.3f}s" if ex.closed else ", connection left open")
                  + f"; body {final.body[:160]!r}")
        if final.status == 408 and fired_by_timer(ex.first_byte_after):
            return Outcome("timeout", None, closed_after, "408 from the server's timer: " + detail)
        return Outcome("status", final.status, closed_after, detail)
    if ex.outcome in ("close", "reset"):
        how = "reset" if ex.outcome == "reset" else "closed"
        if fired_by_timer(ex.closed_after):
            return Outcome("timeout", None, True, f"no response; {how} by the server's timer at {ex.closed_after:.3f}s")
        return Outcome("close", None, True, f"no response; {how} at {ex.closed_after:.3f}s")
    return Outcome("timeout", None, False, f"no response and still open after {ex.elapsed:.3f}s")


# --------------------------------------------------------------------------- expectations


# Upstream validators that accept more than their description string says
# (MalformedInputSuite.cs): cited so the extra code is not our invention.
EXTRA_ACCEPTS: dict[str, list[tuple[str, str]]] = {
    "MAL-POST-CL-HUGE-NO-BODY": [("413", PASS)],  # validator: 400 or 413, or close/timeout
    "MAL-CHUNK-EXT-64K": [("431", PASS)],         # validator: 400 or 431 pass, 2xx warn
    "MAL-RANGE-OVERLAPPING": [("431", PASS)],     # validator: 200/206/400/416/431
}

_ATOM_RE = re.compile(r"^(?:[1-5]xx|\d{3}|close|timeout|!\d{3})$")


@dataclass
class Alternative:
    atoms: list[str]
    verdict: str          # PASS or WARN
    needs_close: bool     # "2xx + close": the server must also close afterwards


class Expectation:
    """The ``expected`` grammar of the vectors.

    Alternatives are separated by `` or `` (or ``, ``); each is a ``/``-list of atoms
    (``2xx``, ``400``, ``close``, ``timeout``, ``!101``), optionally followed by
    `` + close`` (the connection must close after the response) and by
    ``(pass)`` or ``(warn)`` (default pass).
    """

    def __init__(self, text: str, extra: list[tuple[str, str]] | None = None):
        self.text = text
        self.alternatives: list[Alternative] = []
        for part in re.split(r" or |, ", text):
            part = part.strip()
            verdict = PASS
            m = re.fullmatch(r"(.*?)\s*\((pass|warn)\)", part)
            if m:
                part, verdict = m.group(1).strip(), m.group(2)
            needs_close = False
            if part.endswith("+ close"):
                part, needs_close = part[: -len("+ close")].strip(), True
            atoms = [a.strip() for a in part.split("/")]
            for a in atoms:
                if not _ATOM_RE.match(a):
                    raise ValueError(f"unknown atom {a!r} in expected {text!r}")
            self.alternatives.append(Alternative(atoms, verdict, needs_close))
        for atom, verdict in extra or []:
            self.alternatives.append(Alternative([atom], verdict, False))

    @staticmethod
    def _atom_matches(atom: str, outcome: Outcome) -> bool:
        if atom.startswith("!"):
            # "!101": anything but a protocol switch; a silent close is fine, a hang is not
            return outcome.kind == "close" or (outcome.kind == "status" and outcome.status != int(atom[1:]))
        if atom in ("close", "timeout"):
            return outcome.kind == atom
        if outcome.kind != "status":
            return False
        if atom.endswith("xx"):
            return outcome.status // 100 == int(atom[0])
        return outcome.status == int(atom)

    def verdict(self, outcome: Outcome) -> str:
        best = FAIL
        for alt in self.alternatives:
            if any(self._atom_matches(a, outcome) for a in alt.atoms):
                if alt.needs_close and not outcome.closed_after_response:
                    continue
                if alt.verdict == PASS:
                    return PASS
                best = WARN
        return best

    @property
    def needs_close(self) -> bool:
        return any(a.needs_close for a in self.alternatives)

    def is_two_outcome(self) -> bool:
        """More than one kind of answer passes (which one we give is a design choice)."""
        return len(self.alternatives) > 1 or any(len(a.atoms) > 1 for a in self.alternatives)


def expectation_for(probe: Probe) -> Expectation:
    return Expectation(probe.expected, EXTRA_ACCEPTS.get(probe.id))
