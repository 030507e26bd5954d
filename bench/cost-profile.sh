#!/usr/bin/env bash
# Where one forwarded request's CPU goes, counted rather than timed: instructions per request by
# library and by function (callgrind), and system calls per request (strace). Neither count moves
# with what else the machine runs, so two builds can be compared on a busy machine.
#
# The release proxy (one loop) forwards keep-alive GETs to nginx through a credentialed route
# (static access and id tokens), access log off, as in bench/proxy.sh. Each count is the
# difference between a run of N2 and a run of N1 requests divided by N2 - N1, so start-up and
# shutdown cancel out.
#
#   bench/cost-profile.sh                       # N1=300 N2=1300, top 30 functions
#   TOP=60 bench/cost-profile.sh
#   UPSTREAM=https bench/cost-profile.sh        # the upstream over TLS (h2), as bench/proxy.sh's https case
#   ACCESS_LOG=1 bench/cost-profile.sh          # with the access log on, as the default config has it
#   REQ_PATH='/api/v1/accounts/1234567/profile?include=details' bench/cost-profile.sh
#                                               # another request target (default /small, as the bench):
#                                               # what grows with the path (parsing, checks, URL join, libcurl's URL parse)
#   BROWSER_HEADERS=1 bench/cost-profile.sh     # the client sends a browser's fields (User-Agent,
#                                               # Accept*, a cookie: ~900 bytes) instead of Python's two
#   TOKEN_BYTES=1000 bench/cost-profile.sh     # a token of that many bytes (a JWT-sized one; default the
#                                               # bench's 28): libcurl formats each header byte it sends
#                                               # one at a time, so the token's length is paid per request
#   BASE_BIN=/path/to/older/platform-proxy bench/cost-profile.sh   # the same counts for another build,
#                                               # and the functions whose cost moved most between them
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy bench/cost-profile.sh   # skip the build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N1="${N1:-300}"
N2="${N2:-1300}"
TOP="${TOP:-30}"
REQ_PATH="${REQ_PATH:-/small}"
ACCESS_LOG="${ACCESS_LOG:-0}"
if [[ $ACCESS_LOG == 1 ]]; then LOG_ACCESS=true; export CALLGRIND_LOG_LEVEL=info; else LOG_ACCESS=false; fi

if [[ ${BROWSER_HEADERS:-0} == 1 ]]; then
    export KEEPALIVE_HEADERS='{"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
 "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8",
 "Accept-Language": "en-GB,en-US;q=0.9,en;q=0.8", "Accept-Encoding": "gzip, deflate, br, zstd",
 "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty",
 "Referer": "http://127.0.0.1/app/dashboard?tab=overview",
 "Cookie": "session=3f9a1c2e7b4d8f0a6e5c1b9d2a7f4e3c8b6d0a1f5e9c2b7d4a8f3e6c1b0d9a2f7e; theme=dark; consent=analytics%3Dtrue%26ads%3Dfalse; _ga=GA1.1.123456789.1700000000; _ga_ABCDEF=GS1.1.1700000000.5.1.1700000500.0.0.0; locale=en-GB; last_seen=2026-11-24T03%3A00%3A00Z; ab_bucket=7; feature_flags=new-nav%2Cbeta-search%2Cdark-mode; csrf=9c1d7e3a5b8f2c4e6a0d1b9f7e3c5a2d"}'
fi

bench_init
ensure_tools nginx valgrind strace python3
PROXY_BIN="$(build_release)"
TOKEN="bench-token-0123456789abcdef"
if [[ -n ${TOKEN_BYTES:-} ]]; then
    # JWT-like: base64url segments joined by dots.
    TOKEN="$(python3 -c 'import random, string, sys
random.seed(1); n = int(sys.argv[1]); alphabet = string.ascii_letters + string.digits + "-_"
t = "".join(random.choice(alphabet) for _ in range(n))
print("eyJ" + t[3:n // 3] + "." + t[n // 3 + 1:2 * n // 3] + "." + t[2 * n // 3 + 1:])' "$TOKEN_BYTES")"
    (( ${#TOKEN} == TOKEN_BYTES )) || bench_die "a $TOKEN_BYTES-byte token came out ${#TOKEN} bytes"
fi

# UPSTREAM=https: the upstream is nginx over TLS (h2 by ALPN, a private CA made here) instead.
UPSTREAM="${UPSTREAM:-http}"
start_bench_upstream "$UPSTREAM"

# config PORT: the one-loop forwarding config.
config() {
    cat >"$BENCH_DIR/proxy.json" <<JSON
{"listen": ["127.0.0.1:$1"], "workers": 1,
 "provider": {"grant": "static", "accessToken": "$TOKEN", "idToken": "$TOKEN"}, "log": {"access": $LOG_ACCESS},
 "routes": [{"name": "up", "path": "/", "upstream": "$UPSTREAM_URL", "credential": "access_token"}]}
JSON
}

# callgrind_run BIN N OUT: a callgrind profile of a proxy serving N requests.
callgrind_run() {
    local binary="$1" n="$2" out="$3" port
    port="$(free_port)"
    config "$port"
    callgrind_proxy "$out" "$port" "$binary"
    keepalive_gets "$port" "$REQ_PATH" "$n"
    kill -TERM "$CALLGRIND_PID"
    wait "$CALLGRIND_PID" || true
}

# strace_run BIN N: system calls per request of the proxy's threads over N requests.
strace_run() {
    local binary="$1" n="$2" port pid spid
    port="$(free_port)"
    config "$port"
    "$binary" serve --config "$BENCH_DIR/proxy.json" --log-level error 2>/dev/null &
    pid=$!
    BENCH_PIDS+=("$pid")
    wait_http "http://127.0.0.1:$port/_platform/health" 30 || bench_die "proxy did not start"
    keepalive_gets "$port" /small 50
    strace -f -c -o "$BENCH_DIR/strace.txt" -p "$pid" 2>/dev/null &
    spid=$!
    sleep 1
    keepalive_gets "$port" "$REQ_PATH" "$n"
    kill -INT "$spid"
    wait "$spid" || true
    kill -TERM "$pid"
    wait "$pid" || true
    python3 - "$BENCH_DIR/strace.txt" "$n" <<'PY'
import sys
rows, n = [], int(sys.argv[2])
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
        calls = int(parts[3])
        rows.append((calls, parts[-1]))
rows.sort(reverse=True)
total = sum(c for c, _ in rows)
print(f"  system calls per request: {total / n:.2f}  (" + ", ".join(f"{name} {c / n:.2f}" for c, name in rows if c / n >= 0.05) + ")")
PY
}

# profile BIN LABEL: the instruction and system-call counts of one build.
profile() {
    local binary="$1" label="$2"
    bench_log "$label: callgrind, $N1 and $N2 requests"
    callgrind_run "$binary" "$N1" "$BENCH_DIR/cg-1.out"
    callgrind_run "$binary" "$N2" "$BENCH_DIR/cg-2.out"
    echo "== $label ($binary), $UPSTREAM upstream"
    for f in 1 2; do
        callgrind_annotate --auto=no --threshold=100 "$BENCH_DIR/cg-$f.out" >"$BENCH_DIR/annotate-$f.txt" 2>/dev/null
    done
    python3 - "$BENCH_DIR/annotate-1.txt" "$BENCH_DIR/annotate-2.txt" "$N1" "$N2" "$TOP" "$(basename "$binary")" \
        "$BENCH_DIR/functions-${label// /-}.json" <<'PY'
import json, re, subprocess, sys
from collections import defaultdict

def read(path):
    """Self instructions per function, keyed by (object, function)."""
    costs, total = {}, 0
    for line in open(path):
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*$", line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            total = count
            continue
        obj = re.search(r"\[([^\]]+)\]\s*$", rest)
        name = re.sub(r"\s*\[[^\]]+\]\s*$", "", rest)
        name = re.sub(r"^[^:]*:", "", name, count=1) if ":" in name.split("(")[0] else name
        key = (obj.group(1).rsplit("/", 1)[-1] if obj else "platform-proxy", name)
        costs[key] = costs.get(key, 0) + count
    return costs, total

a, ta = read(sys.argv[1])
b, tb = read(sys.argv[2])
n = int(sys.argv[4]) - int(sys.argv[3])
top = int(sys.argv[5])
binary = sys.argv[6]
per = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
total = (tb - ta) / n
print(f"  instructions per request: {total:,.0f}")

def library(obj):
    for prefix, label in (("libcurl", "libcurl"), ("libswift", "Swift runtime + stdlib"), ("libc.so", "libc"),
                          ("libc-", "libc"), ("ld-linux", "dynamic loader"), ("libnghttp2", "nghttp2"),
                          ("libssl", "OpenSSL"), ("libcrypto", "OpenSSL"), ("libz", "zlib"),
                          ("platform-proxy", "platform-proxy (ours)")):
        if obj.startswith(prefix):
            return label
    return "platform-proxy (ours)" if obj == binary else obj

by_lib = defaultdict(float)
for (obj, _), v in per.items():
    by_lib[library(obj)] += v
print("  by library:")
for lib, v in sorted(by_lib.items(), key=lambda kv: -kv[1]):
    if abs(v) >= 0.005 * total:
        print(f"    {v:10,.0f}  {v / total * 100:5.1f} %  {lib}")

names = [name for (_, name) in per]
try:
    demangled = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names),
                               capture_output=True, text=True, timeout=60).stdout.splitlines()
    pretty = dict(zip(names, demangled)) if len(demangled) == len(names) else {}
except Exception:
    pretty = {}
print(f"  top {top} functions (self instructions per request):")
for (obj, name), v in sorted(per.items(), key=lambda kv: -kv[1])[:top]:
    label = pretty.get(name, name)
    print(f"    {v:8,.0f}  {library(obj)[:14]:14}  {label[:110]}")
# Kept for the comparison with the base build: per function, ours keyed by name alone (the two
# binaries have different names), libraries by object and name.
json.dump({f"{library(obj)}|{pretty.get(name, name)}": v for (obj, name), v in per.items()}, open(sys.argv[7], "w"))
PY
    strace_run "$binary" "$N2"
}

profile "$PROXY_BIN" "this build"
if [[ -n "${BASE_BIN:-}" ]]; then
    profile "$BASE_BIN" "base"
    echo "== the functions that moved most, this build minus base (self instructions per request)"
    python3 - "$BENCH_DIR/functions-this-build.json" "$BENCH_DIR/functions-base.json" "$TOP" <<'PY'
import json, sys
new, base, top = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
moved = sorted(((new.get(k, 0) - base.get(k, 0), k) for k in set(new) | set(base)), key=lambda d: -abs(d[0]))
for delta, key in moved[:top]:
    library, _, name = key.partition("|")
    print(f"    {delta:+8,.0f}  {library[:14]:14}  {name[:110]}")
PY
fi
