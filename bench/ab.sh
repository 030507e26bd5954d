#!/usr/bin/env bash
# Is this build faster or slower than another? Both run side by side against the same nginx
# upstream (the job of bench/proxy.sh: a credentialed route, static token, access log off), and
# wrk drives them in alternating rounds (A B B A …), so drift of the machine hits both alike.
# Prints each build's CPU per request and req/s per round and on average, and the ratio.
#
#   BASE_BIN=/path/to/older/platform-proxy bench/ab.sh
#   BASE_BIN=… ROUNDS=8 WRK_DURATION=3s WRK_CONNECTIONS=64 PROXY_WORKERS=1 bench/ab.sh
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy BASE_BIN=… bench/ab.sh   # skip the build
#
# PROXY_LOG_KEY= (empty) leaves the "log" key out of both configs, for binaries older than it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -n "${BASE_BIN:-}" && -x "${BASE_BIN:-}" ]] || bench_die "BASE_BIN must name the platform-proxy binary to compare with"
ROUNDS="${ROUNDS:-8}"
WRK_DURATION="${WRK_DURATION:-3s}"
WRK_THREADS="${WRK_THREADS:-1}"

bench_init
ensure_tools nginx wrk
NEW_BIN="$(build_release)"
TOKEN="bench-token-0123456789abcdef"
read -r NEW_PORT BASE_PORT <<<"$(free_ports 2)"
start_bench_upstream http
config() { bench_proxy_config "$1" "$UPSTREAM_URL"; }
start_proxy "$NEW_BIN" "$NEW_PORT" "$(config "$NEW_PORT")" proxy-new --log-level warning
NEW_PID=$PROXY_PID
start_proxy "$BASE_BIN" "$BASE_PORT" "$(config "$BASE_PORT")" proxy-base --log-level warning
BASE_PID=$PROXY_PID

# Warm both pools.
for port in "$NEW_PORT" "$BASE_PORT"; do WRK_DURATION=1s run_wrk warm "http://127.0.0.1:$port/" >/dev/null; done

declare -A CPU=() RPS=()
round_of() { # NAME PORT PID ROUND
    local before after out rps p50 p99 errors cpu
    before=$(cpu_ticks "$3")
    out="$(run_wrk "$1-$4" "http://127.0.0.1:$2/")"
    after=$(cpu_ticks "$3")
    read -r rps p50 p99 errors < <(parse_wrk "$out")
    ((errors == 0)) || bench_log "warning: $1 round $4: $errors errors"
    cpu=$(ticks_to_us_per_request $((after - before)) "$(wrk_requests "$out")")
    CPU[$1]="${CPU[$1]:-} $cpu"
    RPS[$1]="${RPS[$1]:-} $rps"
    printf '  round %2d  %-4s %8.0f req/s  %6.1f us CPU/request\n' "$4" "$1" "$rps" "$cpu"
}

echo "== A/B, wrk -t$WRK_THREADS -c$WRK_CONNECTIONS, $ROUNDS rounds of $WRK_DURATION each, alternating (new = $NEW_BIN, base = $BASE_BIN)"
for round in $(seq "$ROUNDS"); do
    if ((round % 2)); then
        round_of new "$NEW_PORT" "$NEW_PID" "$round"; round_of base "$BASE_PORT" "$BASE_PID" "$round"
    else
        round_of base "$BASE_PORT" "$BASE_PID" "$round"; round_of new "$NEW_PORT" "$NEW_PID" "$round"
    fi
done
mean() { awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", s / NF }' <<<"$1"; }
cn=$(mean "${CPU[new]}"); cb=$(mean "${CPU[base]}"); rn=$(mean "${RPS[new]}"); rb=$(mean "${RPS[base]}")
awk -v cn="$cn" -v cb="$cb" -v rn="$rn" -v rb="$rb" 'BEGIN {
    printf "mean: new %.1f us CPU/request, %.0f req/s; base %.1f us, %.0f req/s; new/base CPU %.3f, req/s %.3f\n",
        cn, rn, cb, rb, cn / cb, rn / rb }'
