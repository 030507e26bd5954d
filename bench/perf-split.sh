#!/usr/bin/env bash
# Where the proxy's CPU goes under load, kernel included: `perf record` (cpu-clock samples) of the
# release proxy while wrk drives it at c=64, reported by shared object (kernel, libcurl, libc,
# OpenSSL, nghttp2, the binary itself) and by symbol. bench/cost-profile.sh counts instructions in
# user space only; this adds the kernel's share (sockets, epoll) and the time, not the count.
#
# The job is bench/proxy.sh's: a credentialed route (static token) to nginx, access log off.
#
#   bench/perf-split.sh                     # plain upstream, 10 s
#   UPSTREAM=https bench/perf-split.sh      # nginx over TLS (h2), CURL_CA_BUNDLE a private CA
#   SECONDS_=5 TOP=30 bench/perf-split.sh
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy bench/perf-split.sh   # skip the build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION="${SECONDS_:-10}"
TOP="${TOP:-25}"
UPSTREAM="${UPSTREAM:-http}"

bench_init
ensure_tools nginx wrk perf
PROXY_BIN="$(build_release)"
TOKEN="bench-token-0123456789abcdef"

PROXY_PORT="$(free_port)"
start_bench_upstream "$UPSTREAM"
start_proxy "$PROXY_BIN" "$PROXY_PORT" "$(bench_proxy_config "$PROXY_PORT" "$UPSTREAM_URL")" perf-proxy --log-level warning

# Warm the connection pools, then record while wrk runs.
WRK_DURATION=2s run_wrk warm "http://127.0.0.1:$PROXY_PORT/" >/dev/null
perf record -e cpu-clock -F 1999 -p "$PROXY_PID" -o "$BENCH_DIR/perf.data" -- sleep "$DURATION" \
    >"$BENCH_DIR/perf.log" 2>&1 &
PERF_PID=$!
WRK_DURATION="${DURATION}s" out="$(run_wrk load "http://127.0.0.1:$PROXY_PORT/")"
wait "$PERF_PID" || { cat "$BENCH_DIR/perf.log" >&2; bench_die "perf record failed"; }
read -r rps p50 p99 errors <<<"$(parse_wrk "$out")"

echo "== platform-proxy, $UPSTREAM upstream, wrk -t$WRK_THREADS -c$WRK_CONNECTIONS ${DURATION}s: $rps req/s, p50 $p50 ms, p99 $p99 ms, $errors errors"
echo "-- by shared object (share of the proxy's CPU samples)"
perf report -i "$BENCH_DIR/perf.data" --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -15
echo "-- top $TOP symbols"
perf report -i "$BENCH_DIR/perf.data" --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -"$TOP" \
    | sed -E 's/\$s[0-9A-Za-z_]+/&/' | swift demangle --simplified --compact 2>/dev/null | cut -c1-150
