#!/usr/bin/env bash
# Health endpoint throughput: platform-proxy's GET /_platform/health against nginx returning the
# same JSON, side by side in one run (wrk, interleaved rounds), plus the proxy's memory after.
#
#   bench/health.sh
#
# Installs nginx and wrk if missing (apt-get, as root), builds the release binary
# (skip with PLATFORM_PROXY_RELEASE_BIN=path). Knobs: ROUNDS (2), WRK_THREADS (2),
# WRK_CONNECTIONS (64), WRK_DURATION (10s), SWIFT_SCRATCH_PATH, PROXY_LOG, BENCH_KEEP=1.
# About a minute on top of the build.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS="${ROUNDS:-2}"

bench_init
ensure_tools nginx wrk curl python3
PROXY_BIN="$(build_release)"

NGINX_PORT="$(free_port)"
start_nginx "$NGINX_PORT"

PROXY_PORT="$(free_port)"
start_proxy "$PROXY_BIN" "$PROXY_PORT" "$(cat <<EOF
{
  "listen": ["127.0.0.1:$PROXY_PORT"],
  "workers": 0,
  "routes": []
}
EOF
)"

NGINX_URL="http://127.0.0.1:$NGINX_PORT/"
PROXY_URL="http://127.0.0.1:$PROXY_PORT/_platform/health"

# Warm-up (not reported): first connections, page faults, CPU frequency.
WRK_DURATION=2s run_wrk warmup-nginx "$NGINX_URL" >/dev/null
WRK_DURATION=2s run_wrk warmup-proxy "$PROXY_URL" >/dev/null

declare -A RPS_SUM=() P50_SUM=() P99_SUM=()
RESULTS=()
for round in $(seq "$ROUNDS"); do
    for target in nginx proxy; do
        if [[ $target == nginx ]]; then url="$NGINX_URL"; else url="$PROXY_URL"; fi
        bench_log "round $round: $target ($WRK_DURATION, $WRK_THREADS threads, $WRK_CONNECTIONS connections)"
        out="$(run_wrk "$target-$round" "$url")"
        read -r rps p50 p99 errors < <(parse_wrk "$out")
        ((errors == 0)) || bench_log "warning: $target round $round had $errors errors/non-2xx (see $out with BENCH_KEEP=1)"
        RESULTS+=("$(printf '%-6s %5s %12s %10s %10s %7s' "$target" "$round" "$rps" "$p50" "$p99" "$errors")")
        RPS_SUM[$target]=$(awk -v a="${RPS_SUM[$target]:-0}" -v b="$rps" 'BEGIN { print a + b }')
        P50_SUM[$target]=$(awk -v a="${P50_SUM[$target]:-0}" -v b="$p50" 'BEGIN { print a + b }')
        P99_SUM[$target]=$(awk -v a="${P99_SUM[$target]:-0}" -v b="$p99" 'BEGIN { print a + b }')
    done
done

avg() { awk -v s="$1" -v n="$ROUNDS" -v f="$2" 'BEGIN { printf f, s / n }'; }

echo
echo "GET health, wrk -t$WRK_THREADS -c$WRK_CONNECTIONS -d$WRK_DURATION, $(nproc) CPUs, $ROUNDS rounds interleaved"
printf '%-6s %5s %12s %10s %10s %7s\n' target round "req/s" "p50 ms" "p99 ms" errors
printf '%s\n' "${RESULTS[@]}"
echo
printf '%-6s %5s %12s %10s %10s\n' target "" "avg req/s" "avg p50" "avg p99"
for target in nginx proxy; do
    printf '%-6s %5s %12s %10s %10s\n' "$target" "" "$(avg "${RPS_SUM[$target]}" '%.0f')" \
        "$(avg "${P50_SUM[$target]}" '%.3f')" "$(avg "${P99_SUM[$target]}" '%.3f')"
done
awk -v p="${RPS_SUM[proxy]}" -v n="${RPS_SUM[nginx]}" -v pl="${P99_SUM[proxy]}" -v nl="${P99_SUM[nginx]}" 'BEGIN {
    printf "proxy/nginx: throughput %.3fx, p99 latency %.3fx\n", (n ? p / n : 0), (nl ? pl / nl : 0)
}'
echo "platform-proxy memory after the runs: VmRSS $(rss_kb "$PROXY_PID") kB, peak VmHWM $(peak_rss_kb "$PROXY_PID") kB"
