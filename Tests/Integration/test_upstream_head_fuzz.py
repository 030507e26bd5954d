"""Malformed upstream response heads, through the real binary on one event loop (`"workers": 1`,
so every transfer after the first runs on a reused easy handle): whatever bytes an upstream
answers with, the client gets an answer (the upstream's response relayed, or a JSON 502/504) and
the process lives on.

The regression tests pin the crash of libcurl 7.88's header store (curl issue 11101): a response
whose first field line starts with a space or tab, after any earlier transfer on the handle, was
a use after free in libcurl (SIGSEGV, or glibc's "unaligned tcache chunk" abort, at once or at
exit). The fuzz test mutates valid heads (seeded, bounded in cases and seconds) and interleaves
them with valid requests, some through a redirect hop to a second upstream.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import ssl
import time

import pytest

from proxy import RawUpstream, base_config, build_request, exchange

SEED = int(os.environ.get("UPSTREAM_FUZZ_SEED", "9112"))
CASES = int(os.environ.get("UPSTREAM_FUZZ_CASES", "1000"))
SECONDS = float(os.environ.get("UPSTREAM_FUZZ_SECONDS", "45"))
TIMEOUT = 2  # the route's timeoutSeconds: a case that leaves the proxy waiting costs this at most


class CaseUpstream(RawUpstream):
    """A raw HTTP/1.1 upstream on loopback that answers by path, on keep-alive connections:
    `/ok/<n>` a valid 200 whose body names n (the connection stays open for the next request);
    `/last/<n>` a valid 200 after which it closes the connection;
    `/hop/<n>` a 302 to `hop_to` (another CaseUpstream) at `/case/<n>`; `/case/<n>` the bytes
    set in `cases[n]`, after which it closes the connection (when n is in `holds`, only after
    the route's timeout has passed, or a next request came); anything else a 404."""

    def __init__(self, cases: dict[int, bytes], holds: set[int], tls: ssl.SSLContext | None = None):
        self.cases = cases
        self.holds = holds
        self.tls = tls
        self.resumed: list[bool] = []  # per TLS connection: whether its handshake resumed a session
        self.hop_to: CaseUpstream | None = None
        self.errors: list[str] = []
        super().__init__(backlog=128)

    def _serve(self, conn: socket.socket):
        conn.settimeout(30)
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()
                return
            self.resumed.append(conn.session_reused)
        buf = b""
        with conn:
            try:
                while True:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
                    if not self._answer(conn, target):
                        return
            except OSError:
                return

    def _answer(self, conn: socket.socket, target: str) -> bool:
        """Sends the answer for `target`; False when the connection is to close."""
        kind, _, number = target.strip("/").partition("/")
        if kind == "ok":
            body = f"ok-{number}".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
            return True
        if kind == "last":  # a valid 200 on a connection that then closes
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\nlast")
            conn.shutdown(socket.SHUT_WR)
            return False
        if kind == "hop" and self.hop_to is not None:
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/case/%s\r\nContent-Length: 0\r\n\r\n"
                         % (self.hop_to.port, number.encode()))
            return True
        if kind == "case" and number.isdigit() and int(number) in self.cases:
            conn.sendall(self.cases[int(number)])
            if int(number) in self.holds:
                # The upstream stalls before it closes, while the proxy waits; a next request on
                # the connection (the case was a whole response) ends the stall unanswered.
                conn.settimeout(TIMEOUT + 1)
                try:
                    conn.recv(1)
                except socket.timeout:
                    pass
            conn.shutdown(socket.SHUT_WR)
            return False
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        return True


def start_fuzz_proxy(start_proxy):
    """One proxy with one event loop, routed to a CaseUpstream whose `/hop/` goes to a second one."""
    cases: dict[int, bytes] = {}
    main, foreign = CaseUpstream(cases, set()), CaseUpstream(cases, set())
    main.hop_to = foreign
    route = {"name": "fuzz", "path": "/", "upstream": f"http://127.0.0.1:{main.port}/", "credential": "none",
             "timeoutSeconds": TIMEOUT}
    server = start_proxy(config=base_config(routes=[route], workers=1))
    return server, cases, main, foreign


def ask(server, method: str, path: str, timeout: float = 3 * TIMEOUT + 5):
    return exchange((server.host, server.port), build_request(method, path, {"Host": server.host_header}),
                    timeout=timeout, close_wait=0, method=method)


_STATUS_LINE = re.compile(rb"^HTTP/1\.1 [1-5]\d\d[^\r\n]*\r\n")


def answered(ex) -> bool:
    """Whether the client got an answer: a whole response, or a relayed head whose body the
    upstream cut short (the proxy then closes the connection: nothing else can tell the client)."""
    if ex.parse_error is not None:
        return False
    if ex.final is not None:
        return True
    return ex.closed and _STATUS_LINE.match(ex.data) is not None and b"\r\n\r\n" in ex.data


def assert_proxy_serves(server, tag: str):
    """The process lives, answers its health endpoint and relays a valid upstream response."""
    assert server.running, f"the proxy died after {tag}: {server.stderr_text()[-3000:]}"
    health = ask(server, "GET", "/_platform/health", timeout=5)
    assert health.status == 200, (tag, health.outcome, health.data[:300])
    ok = ask(server, "GET", f"/ok/{tag}")
    assert ok.status == 200 and ok.final.body == f"ok-{tag}".encode(), (tag, ok.outcome, ok.data[:300])


# --------------------------------------------------------------------------- regression


FOLDED_FIRST_LINES = [b" X: y", b"\tX: y", b"  Set-Cookie: a=b", b" ", b"\t\t", b" : "]


def test_a_first_field_line_starting_with_whitespace_after_an_earlier_transfer_is_a_502_not_a_crash(start_proxy):
    """Was: libcurl 7.88 appended the line to the field it had stored last for the handle's previous
    transfer, freed when this one started (curl issue 11101): SIGSEGV or "malloc(): unaligned
    tcache chunk", now or at exit (the teardown checks the exit code). Now each transfer has a
    libcurl handle of its own, which refuses the line: a 502."""
    server, cases, main, foreign = start_fuzz_proxy(start_proxy)
    for i, first in enumerate(FOLDED_FIRST_LINES * 3):
        cases[i] = b"HTTP/1.1 200 OK\r\n" + first + b"\r\nContent-Length: 2\r\n\r\nok"
        assert_proxy_serves(server, f"before-{i}")
        ex = ask(server, "GET", f"/case/{i}")
        assert ex.status == 502 and b'"error":"upstream_unreachable"' in ex.final.body, (first, ex.outcome, ex.data)
    assert_proxy_serves(server, "end")
    assert any("first field line begins with a space or tab" in e.get("error", "")
               for e in server.log_events("upstream_failed")), server.stderr_text()
    main.close()
    foreign.close()


def test_a_redirect_hop_to_an_upstream_whose_first_field_line_is_folded_is_a_502_not_a_crash(start_proxy):
    """One request is enough: its first hop (a 302) stores fields on the handle the redirect's
    transfer then runs on."""
    server, cases, main, foreign = start_fuzz_proxy(start_proxy)
    for i, first in enumerate(FOLDED_FIRST_LINES * 3):
        cases[i] = b"HTTP/1.1 200 OK\r\n" + first + b"\r\nContent-Length: 2\r\n\r\nok"
        ex = ask(server, "GET", f"/hop/{i}")
        assert ex.status == 502 and b'"error":"upstream_unreachable"' in ex.final.body, (first, ex.outcome, ex.data)
        assert server.running, server.stderr_text()[-3000:]
    assert_proxy_serves(server, "end")
    main.close()
    foreign.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test CA")
def test_over_tls_a_first_field_line_starting_with_whitespace_is_a_502_not_a_crash(start_proxy, tmp_path):
    """The same fault over an HTTP/1.1 TLS upstream: no byte of it is readable before libcurl
    decrypts it, so only a handle without the stale field keeps the process alive."""
    from test_tls_upstream import make_ca_and_cert

    ca, cert, key = make_ca_and_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    cases: dict[int, bytes] = {}
    upstream = CaseUpstream(cases, set(), tls=context)
    route = {"name": "tls", "path": "/", "upstream": f"https://127.0.0.1:{upstream.port}/", "credential": "none",
             "timeoutSeconds": 10}
    server = start_proxy(config=base_config(routes=[route], workers=1), env={**os.environ, "CURL_CA_BUNDLE": str(ca)})
    for i, first in enumerate(FOLDED_FIRST_LINES):
        cases[i] = b"HTTP/1.1 200 OK\r\n" + first + b"\r\nContent-Length: 2\r\n\r\nok"
        assert_proxy_serves(server, f"before-{i}")
        ex = ask(server, "GET", f"/case/{i}")
        assert ex.status == 502 and b'"error":"upstream_unreachable"' in ex.final.body, (first, ex.outcome, ex.data)
    assert_proxy_serves(server, "end")
    upstream.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test CA")
def test_a_new_tls_connection_to_an_upstream_resumes_the_session_an_earlier_transfer_got(start_proxy, tmp_path):
    """Each transfer has a new libcurl handle, and a handle's own TLS session cache goes with it:
    the client's shared cache keeps them, so a new connection (the last one closed) resumes the
    session rather than verifying the upstream's certificate chain again."""
    from test_tls_upstream import make_ca_and_cert

    ca, cert, key = make_ca_and_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream = CaseUpstream({}, set(), tls=context)
    route = {"name": "tls", "path": "/", "upstream": f"https://127.0.0.1:{upstream.port}/", "credential": "none",
             "timeoutSeconds": 10}
    server = start_proxy(config=base_config(routes=[route], workers=1), env={**os.environ, "CURL_CA_BUNDLE": str(ca)})
    for i in range(4):
        ex = ask(server, "GET", f"/last/{i}")
        assert ex.status == 200 and ex.final.body == b"last", (ex.outcome, ex.data)
    assert len(upstream.resumed) == 4, upstream.resumed
    assert upstream.resumed[1:] == [True, True, True], upstream.resumed
    upstream.close()


def test_a_folded_line_after_an_interim_response_is_a_502(start_proxy):
    """The fold's field is then the 1xx head's (libcurl unfolds into it): refused by the proxy's
    own header check, never relayed."""
    server, cases, main, foreign = start_fuzz_proxy(start_proxy)
    cases[0] = b"HTTP/1.1 100 Continue\r\nX-Hint: 1\r\n\r\nHTTP/1.1 200 OK\r\n X: y\r\nContent-Length: 2\r\n\r\nok"
    assert_proxy_serves(server, "before")
    ex = ask(server, "GET", "/case/0")
    assert ex.status == 502, (ex.outcome, ex.data)
    assert_proxy_serves(server, "after")
    main.close()
    foreign.close()


def test_a_head_line_that_is_no_field_is_a_502(start_proxy):
    """libcurl refuses a field line without a colon before the proxy sees it: the client gets the
    JSON 502, and the proxy goes on relaying."""
    server, cases, main, foreign = start_fuzz_proxy(start_proxy)
    cases[0] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nNoColonHere\r\n\r\nok"
    assert_proxy_serves(server, "before")
    ex = ask(server, "GET", "/case/0")
    assert ex.status == 502 and b'"error":"upstream_unreachable"' in ex.final.body, (ex.outcome, ex.data)
    assert_proxy_serves(server, "after")
    main.close()
    foreign.close()


# --------------------------------------------------------------------------- fuzz


BASES = [
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-One: 1\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=b; Path=/\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\n\r\n<p>gone</p>",
    b"HTTP/1.1 204 No Content\r\nX-Empty: 1\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nETag: \"x\"\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 500 Internal Server Error\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nContent-Length: 4\r\n\r\noops",
]

BAD_STATUS_LINES = [
    b"HTTP/1.1 2000 OK", b"HTTP/1.1 20 OK", b"HTTP/1.1 099 Low", b"HTTP/1.1 600 High", b"HTTP/1.1 -200 X",
    b"HTTP/2 200", b"HTTP/1.1 200", b"HTTP/1.1  200 OK", b"http/1.1 200 OK", b"HTTP/1.1\t200 OK",
    b"HTTP/1.10 200 OK", b"HTTP/0.9 200 OK", b"HTTP/3 200 OK", b"ICY 200 OK", b"RTSP/1.0 200 OK",
    b"HTTP/1.1 200 OK\x00", b"", b"hello", b" HTTP/1.1 200 OK", b"HTTP/1.1 101 Switching Protocols",
    b"HTTP/1.1 200 \xff\xfe", b"HTTP/1.1 99999999999999999999 X", b"HTTP/", b"HTTP/1.1 1xx Odd",
]

CONTENT_LENGTHS = [b"5, 6", b"-1", b"99999999999999999999", b"+5", b"0x5", b"5 5", b" 5", b"", b"5\x00",
                   b"5\x0b", b"1000", b"0", b"2", b"5, 5", b"\xff"]

TRANSFER_ENCODINGS = [b"chunked, gzip", b"gzip", b"xchunked", b"chunked\x0b", b"identity", b"chunked, chunked",
                      b"CHUNKED", b"chunked;q=1", b"", b"\x00chunked"]

BAD_CHUNKS = [b"zz\r\nhello\r\n0\r\n\r\n", b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n", b"5;ext=1\r\nhello\r\n0\r\n\r\n",
              b"5\r\nhello\r\n", b"5\r\nhelloXX0\r\n\r\n", b"-5\r\nhello\r\n0\r\n\r\n", b"5\nhello\n0\n\n",
              b"0\r\nTrailer: x\r\n folded\r\n\r\n", b"0\r\n\tX: y\r\n\r\n", b"0\r\n\r\nGARBAGE"]

PALETTE = b"\x00\r\n \t:;,\x7f\x80\xff\x0b\x0c\"\\HTTP/1.1 200aZ"


def split_head(response: bytes) -> tuple[bytes, bytes]:
    at = response.find(b"\r\n\r\n")
    return (response, b"") if at < 0 else (response[:at + 2], response[at + 2:])


def field_line_starts(head: bytes) -> list[int]:
    """Offsets in `head` where a line after the first begins."""
    return [m.end() for m in re.finditer(rb"\r\n", head)][:-1] or [len(head)]


def mutate(rng: random.Random, response: bytes) -> bytes:
    """One mutation of a whole upstream response (head and body)."""
    head, rest = split_head(response)
    kind = rng.randrange(17)
    starts = field_line_starts(head)
    if kind == 0:  # a first field line that starts with whitespace (the libcurl crash)
        first = head.find(b"\r\n") + 2
        line = rng.choice([b" ", b"\t", b"  ", b" \t"]) + rng.choice([b"X: y", b"", b"folded", b": v", b"\x00"])
        return head[:first] + line + b"\r\n" + head[first:] + rest
    if kind == 1:  # some field line starts with whitespace
        at = rng.choice(starts)
        return head[:at] + rng.choice([b" ", b"\t"]) + head[at:] + rest
    if kind == 2:  # a line of whitespace alone
        at = rng.choice(starts)
        return head[:at] + rng.choice([b" \r\n", b"\t\r\n", b" \n", b"\r \r\n"]) + head[at:] + rest
    if kind == 3:  # a line ending made bare, doubled, swapped or removed
        ends = [m.start() for m in re.finditer(rb"\r\n", response)] or [0]
        at = rng.choice(ends)
        return response[:at] + rng.choice([b"\n", b"\r", b"\r\r\n", b"\n\r", b"", b"\r\n\r\n"]) + response[at + 2:]
    if kind == 4:  # bytes inserted
        at = rng.randrange(len(response) + 1)
        return response[:at] + bytes(rng.choice(PALETTE) for _ in range(rng.randint(1, 8))) + response[at:]
    if kind == 5:  # bytes overwritten
        data = bytearray(response)
        for _ in range(rng.randint(1, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == 6:  # cut short (the upstream closes there)
        return response[:rng.randrange(len(response) + 1)]
    if kind == 7:  # a long field line (libcurl refuses lines over 100 KiB)
        size = rng.choice([8_000, 60_000, 99_000, 102_400, 150_000])
        at = rng.choice(starts)
        return head[:at] + b"X-Long: " + b"v" * size + b"\r\n" + head[at:] + rest
    if kind == 8:  # many fields
        at = rng.choice(starts)
        many = b"".join(b"X-F%d: %d\r\n" % (i, i) for i in range(rng.choice([100, 1000, 3000])))
        return head[:at] + many + head[at:] + rest
    if kind == 9:  # a bad status line
        first = head.find(b"\r\n")
        return rng.choice(BAD_STATUS_LINES) + head[first:] + rest
    if kind == 10:  # Content-Length fields, malformed or repeated
        at = rng.choice(starts)
        fields = b"".join(b"Content-Length: " + rng.choice(CONTENT_LENGTHS) + b"\r\n" for _ in range(rng.randint(1, 2)))
        return head[:at] + fields + head[at:] + rest
    if kind == 11:  # Transfer-Encoding fields, malformed, beside a Content-Length, or a bad chunked body
        at = rng.choice(starts)
        te = b"Transfer-Encoding: " + rng.choice(TRANSFER_ENCODINGS) + b"\r\n"
        body = rng.choice(BAD_CHUNKS + [rest[2:]])
        return head[:at] + te + head[at:] + b"\r\n" + body
    if kind == 12:  # a line that is no field
        at = rng.choice(starts)
        line = rng.choice([b"NoColonHere", b": value", b"Name : v", b"Na me: v", b"\x00: v", b"::::", b"X:\x00y",
                           b"Content-Length : 5", b"Content-Length:\r5"])
        return head[:at] + line + b"\r\n" + head[at:] + rest
    if kind == 13:  # interim heads before the final one
        interim = rng.choice([b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 102 Processing\r\nX-P: 1\r\n\r\n",
                              b"HTTP/1.1 100 Continue\r\n X: folded\r\n\r\n"])
        return interim * rng.choice([1, 2, 20, 200]) + response
    if kind == 14:  # two responses back to back, or bytes after the body
        return response + rng.choice([response, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"junk\r\n\r\n"])
    if kind == 15:  # random bytes only, or nothing at all
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 16, 200])))
    # kind 16: a header field with a NUL, CR or LF inside its value or name
    at = rng.choice(starts)
    line = b"X-" + rng.choice([b"A\x00B: v", b"A: v\x00w", b"A: v\rw", b"A: v\nw"])
    return head[:at] + line + b"\r\n" + head[at:] + rest


def make_case(rng: random.Random) -> bytes:
    response = rng.choice(BASES)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        response = mutate(rng, response)
    return response


def test_fuzzed_upstream_heads_never_crash_the_proxy_and_every_client_gets_an_answer(start_proxy):
    """Seeded mutations of valid heads (whitespace-led and folded lines, CR/LF placement, inserted
    and overwritten bytes, NULs, long lines and many fields, bad status lines, malformed or
    repeated Content-Length and Transfer-Encoding, bad chunks, interim heads, truncation and early
    close, a stall), each after a valid request on the same loop, some through a redirect hop. After each:
    the client got an answer, the proxy answers its health endpoint and relays a valid response.
    Bounded by `CASES` and `SECONDS` (env UPSTREAM_FUZZ_CASES, _SECONDS, _SEED to explore)."""
    rng = random.Random(SEED)
    server, cases, main, foreign = start_fuzz_proxy(start_proxy)
    deadline = time.monotonic() + SECONDS
    statuses: dict[int, int] = {}
    ran = 0
    for i in range(CASES):
        if time.monotonic() > deadline:
            break
        cases[i] = make_case(rng)
        method = "HEAD" if rng.random() < 0.1 else "GET"
        path = f"/hop/{i}" if rng.random() < 0.15 else f"/case/{i}"
        if rng.random() < 0.008:  # a few stall: the head timeout (504) or a stalled body
            main.holds.add(i)
            foreign.holds.add(i)
        ex = ask(server, method, path)
        assert answered(ex), (f"case {i} (seed {SEED}) {method} {path}: no answer ({ex.outcome}, {ex.parse_error}): "
                              f"{ex.data[:300]!r}; upstream sent {cases[i][:300]!r}")
        if ex.final is not None:
            statuses[ex.final.status] = statuses.get(ex.final.status, 0) + 1
            if ex.final.status in (502, 504) and method == "GET":
                assert b'"error":"upstream_' in ex.final.body, (i, ex.final)
        if not server.running:
            pytest.fail(f"case {i} (seed {SEED}) killed the proxy; upstream sent {cases[i][:300]!r}: "
                        f"{server.stderr_text()[-3000:]}")
        assert_proxy_serves(server, str(i))
        ran += 1
    print(f"{ran} cases (seed {SEED}), statuses {sorted(statuses.items())}")
    assert ran >= min(CASES, 100), f"only {ran} cases ran in {SECONDS} s"
    # The mutations reach both sides: some heads refused, some relayed.
    assert statuses.get(502, 0) > 0 and sum(n for s, n in statuses.items() if s < 500) > 0, statuses
    assert server.running, server.stderr_text()[-3000:]
    main.close()
    foreign.close()
