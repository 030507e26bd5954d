#!/usr/bin/env bash
# Analytics ingest (issue 5's benchmark): 64 concurrent clients POST batches of 10 events to
# /_platform/analytics/events; every 202 means the batch was committed (fsync, WAL
# synchronous=FULL). Prints durable events/s, the 202's p50/p99, and fsyncs (commits) per second.
#
#   bench/analytics.sh
#
# Knobs: WRK_CONNECTIONS (64), WRK_DURATION (10s), PLATFORM_PROXY_RELEASE_BIN, BENCH_KEEP=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ulimit -n 65536 2>/dev/null || true

bench_init
ensure_tools wrk curl python3
PROXY_BIN="$(build_release)"
PORT="$(free_port)"
ID_TOKEN_FILE="$BENCH_REPO_ROOT/Config/dev-id-token.txt"

cat >"$BENCH_DIR/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local events = {}
for i = 1, 10 do
  events[i] = string.format('{"path":"bench.screen%d","event":"tap","value":"%d"}', i, i)
end
-- Distinct keys per request keep the buffer-interval de-duplication from dropping values.
local n = 0
request = function()
  n = n + 1
  local body = '{"events":[' .. table.concat(events, ","):gsub("tap", "tap" .. n) .. ']}'
  return wrk.format(nil, "/_platform/analytics/events", nil, body)
end
LUA

# Uploads off (long interval) so only ingest is measured.
cat >"$BENCH_DIR/analytics.json" <<JSON
{
  "listen": ["127.0.0.1:$PORT"],
  "stateDirectory": "$BENCH_DIR/state",
  "provider": {"grant": "static", "accessToken": "bench-token", "idToken": {"file": "$ID_TOKEN_FILE"}},
  "analytics": {"root": "bench", "endpoint": "http://127.0.0.1:9/unused", "pushIntervalSeconds": 86400,
                "bufferIntervalSeconds": 0, "maxStoredEvents": 100000000}
}
JSON
"$PROXY_BIN" serve --log-level warning --config "$BENCH_DIR/analytics.json" 2>"$BENCH_DIR/proxy.log" &
PROXY_PID=$!; BENCH_PIDS+=("$PROXY_PID")
wait_http "http://127.0.0.1:$PORT/_platform/health" 10 || { cat "$BENCH_DIR/proxy.log" >&2; bench_die "platform-proxy did not start"; }

metric() { curl -s "http://127.0.0.1:$PORT/_platform/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
WRK_DURATION=2s run_wrk warmup "http://127.0.0.1:$PORT" -s "$BENCH_DIR/post.lua" >/dev/null
c0=$(metric platform_proxy_analytics_commits_total); q0=$(metric platform_proxy_analytics_queued_total); t0=$(date +%s.%N)
out="$(run_wrk ingest "http://127.0.0.1:$PORT" -s "$BENCH_DIR/post.lua")"
t1=$(date +%s.%N); c1=$(metric platform_proxy_analytics_commits_total); q1=$(metric platform_proxy_analytics_queued_total)
read -r rps p50 p99 errors < <(parse_wrk "$out")
echo
echo "analytics ingest: wrk -t$WRK_THREADS -c$WRK_CONNECTIONS -d$WRK_DURATION, 10 events per POST, $(nproc) CPUs"
awk -v r="$rps" -v p50="$p50" -v p99="$p99" -v e="$errors" -v c0="$c0" -v c1="$c1" -v q0="$q0" -v q1="$q1" -v t0="$t0" -v t1="$t1" 'BEGIN {
    secs = t1 - t0
    printf "requests/s %.0f, durable events/s %.0f (committed per metrics: %.0f/s), 202 p50 %.3f ms, p99 %.3f ms, errors %d\n",
           r, r * 10, (q1 - q0) / secs, p50, p99, e
    printf "commits (fsyncs) %.0f in %.1f s = %.0f/s, %.1f events per commit\n", c1 - c0, secs, (c1 - c0) / secs, (q1 - q0) / ((c1 - c0) ? (c1 - c0) : 1)
}'
echo "store: $(du -sh "$BENCH_DIR/state" | cut -f1), proxy RSS $(rss_kb "$PROXY_PID") kB"
