#!/usr/bin/env bash
# Proxying throughput, side by side in one run (issue 3's benchmark):
#   (a) wrk -> nginx "return 200" upstream directly (the limit)
#   (b) wrk -> nginx as a proxy and HAProxy as a proxy, each doing platform-proxy's job: both
#       credential headers, X-Forwarded-For/-Proto/-Host, Via, an X-Request-ID on the upstream
#       request and on the response, and an upstream keep-alive pool
#   (c) wrk -> platform-proxy (static token, both headers) -> the same upstream
# for 64 and 256 connections, interleaved over ROUNDS rounds; prints req/s, p50, p99 and the
# ratios c/b (against the stronger peer) and c/a, each target's own CPU per request; then the
# proxy's RSS with 1,000 idle clients, and what libcurl alone costs per request (bench/curl-floor.c:
# the upstream side of every forwarded request, with no server side at all).
#
#   bench/proxy.sh
#
# Installs nginx, haproxy, wrk if missing; builds the release binary (PLATFORM_PROXY_RELEASE_BIN
# skips it). Knobs: ROUNDS (2), WRK_DURATION (10s), CONNECTIONS ("64 256"), PROXY_WORKERS (0),
# BENCH_KEEP=1. About 3 minutes on top of the build.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ulimit -n 65536 2>/dev/null || true

ROUNDS="${ROUNDS:-2}"
CONNECTIONS="${CONNECTIONS:-64 256}"
TOKEN="bench-token-0123456789abcdef"

bench_init
ensure_tools nginx haproxy wrk curl python3
PROXY_BIN="$(build_release)"

UP_PORT="$(free_port)"; NGX_PORT="$(free_port)"; HAP_PORT="$(free_port)"; PROXY_PORT="$(free_port)"

# (a) the upstream.
start_nginx "$UP_PORT"
UP_PID=$NGINX_PID

# (b1) nginx as a proxy: its own instance, both headers, keep-alive pool to the upstream.
mkdir -p "$BENCH_DIR/nginx-proxy/logs" "$BENCH_DIR/nginx-proxy/tmp"
cat >"$BENCH_DIR/nginx-proxy/nginx.conf" <<CONF
worker_processes auto;
pid $BENCH_DIR/nginx-proxy/nginx.pid;
error_log $BENCH_DIR/nginx-proxy/logs/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $BENCH_DIR/nginx-proxy/tmp/body;
    proxy_temp_path $BENCH_DIR/nginx-proxy/tmp/proxy;
    fastcgi_temp_path $BENCH_DIR/nginx-proxy/tmp/fastcgi;
    uwsgi_temp_path $BENCH_DIR/nginx-proxy/tmp/uwsgi;
    scgi_temp_path $BENCH_DIR/nginx-proxy/tmp/scgi;
    upstream up { server 127.0.0.1:$UP_PORT; keepalive 256; keepalive_requests 1000000; }
    map \$http_x_request_id \$rid { default \$http_x_request_id; "" \$request_id; }
    server {
        listen 127.0.0.1:$NGX_PORT;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "Bearer $TOKEN";
            proxy_set_header X-Authorization "Bearer $TOKEN";
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$host;
            proxy_set_header Via "1.1 nginx";
            proxy_set_header X-Request-ID \$rid;
            add_header X-Request-ID \$rid always;
        }
    }
}
CONF
nginx -p "$BENCH_DIR/nginx-proxy" -c "$BENCH_DIR/nginx-proxy/nginx.conf" -g 'daemon off;' 2>&1 &
NGX_PID=$!; BENCH_PIDS+=("$NGX_PID")
wait_http "http://127.0.0.1:$NGX_PORT/" 10 || bench_die "nginx proxy did not start"

# (b2) HAProxy: the same job, with connection reuse to the upstream.
cat >"$BENCH_DIR/haproxy.cfg" <<CONF
global
    nbthread $(nproc)
    maxconn 4000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
    option http-keep-alive
frontend fe
    bind 127.0.0.1:$HAP_PORT
    option forwardfor
    unique-id-format %{+X}o%ci:%cp_%fi:%fp_%Ts_%rt:%pid
    unique-id-header X-Request-ID
    http-request set-header Authorization "Bearer $TOKEN"
    http-request set-header X-Authorization "Bearer $TOKEN"
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
    http-request add-header Via "1.1 haproxy"
    http-response set-header X-Request-ID %[unique-id]
    default_backend be
backend be
    server up 127.0.0.1:$UP_PORT
CONF
haproxy -f "$BENCH_DIR/haproxy.cfg" -db >"$BENCH_DIR/haproxy.log" 2>&1 &
HAP_PID=$!; BENCH_PIDS+=("$HAP_PID")
wait_http "http://127.0.0.1:$HAP_PORT/" 10 || { cat "$BENCH_DIR/haproxy.log" >&2; bench_die "haproxy did not start"; }

# (c) platform-proxy: the same job through a route with a static token; access log off like the peers.
PROXY_LOG=/dev/null start_proxy "$PROXY_BIN" "$PROXY_PORT" "$(cat <<JSON
{
  "listen": ["127.0.0.1:$PROXY_PORT"],
  "workers": ${PROXY_WORKERS:-0},
  "provider": {"grant": "static", "accessToken": "$TOKEN"},
  "limits": {"maxConnections": 20000},
  "routes": [{"name": "bench", "path": "/", "upstream": "http://127.0.0.1:$UP_PORT/", "credential": "access_token"}]
}
JSON
)"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true
"$PROXY_BIN" serve --config "$BENCH_DIR/proxy.json" --log-level warning 2>/dev/null >/dev/null &
PROXY_PID=$!; BENCH_PIDS+=("$PROXY_PID")
wait_http "http://127.0.0.1:$PROXY_PORT/" 10 || bench_die "platform-proxy did not forward"
curl -s "http://127.0.0.1:$PROXY_PORT/" | grep -q ok || bench_die "platform-proxy answer is not the upstream's"

declare -A URL=([direct]="http://127.0.0.1:$UP_PORT/" [nginx]="http://127.0.0.1:$NGX_PORT/"
                [haproxy]="http://127.0.0.1:$HAP_PORT/" [platform]="http://127.0.0.1:$PROXY_PORT/")
TARGETS=(direct nginx haproxy platform)
declare -A PIDS=([direct]="$UP_PID" [nginx]="$NGX_PID" [haproxy]="$HAP_PID" [platform]="$PROXY_PID")
curl -sI "http://127.0.0.1:$NGX_PORT/" | grep -qi '^x-request-id:' || bench_die "nginx proxy does not send X-Request-ID"
curl -sI "http://127.0.0.1:$HAP_PORT/" | grep -qi '^x-request-id:' || bench_die "haproxy does not send X-Request-ID"

for t in "${TARGETS[@]}"; do WRK_DURATION=2s run_wrk "warmup-$t" "${URL[$t]}" >/dev/null; done

declare -A RPS=() P50=() P99=() CPU=()
for c in $CONNECTIONS; do
    for round in $(seq "$ROUNDS"); do
        for t in "${TARGETS[@]}"; do
            bench_log "c=$c round $round: $t"
            before=$(cpu_ticks ${PIDS[$t]})
            out="$(WRK_CONNECTIONS=$c run_wrk "$t-$c-$round" "${URL[$t]}")"
            after=$(cpu_ticks ${PIDS[$t]})
            read -r rps p50 p99 errors < <(parse_wrk "$out")
            cpu=$(ticks_to_us_per_request $((after - before)) "$(wrk_requests "$out")")
            ((errors == 0)) || bench_log "warning: $t c=$c round $round: $errors errors"
            RPS[$t,$c]=$(awk -v a="${RPS[$t,$c]:-0}" -v b="$rps" 'BEGIN { print a + b / '"$ROUNDS"' }')
            P50[$t,$c]=$(awk -v a="${P50[$t,$c]:-0}" -v b="$p50" 'BEGIN { print a + b / '"$ROUNDS"' }')
            P99[$t,$c]=$(awk -v a="${P99[$t,$c]:-0}" -v b="$p99" 'BEGIN { print a + b / '"$ROUNDS"' }')
            CPU[$t,$c]=$(awk -v a="${CPU[$t,$c]:-0}" -v b="$cpu" 'BEGIN { print a + b / '"$ROUNDS"' }')
        done
    done
done

echo
echo "GET / through each proxy to an nginx 'return 200' upstream; wrk -t$WRK_THREADS -d$WRK_DURATION; $(nproc) CPUs; $ROUNDS rounds interleaved (averages)"
printf '%-10s %6s %12s %10s %10s %16s\n' target conns "req/s" "p50 ms" "p99 ms" "own CPU us/req"
for c in $CONNECTIONS; do
    for t in "${TARGETS[@]}"; do
        printf '%-10s %6s %12.0f %10.3f %10.3f %16.1f\n' "$t" "$c" "${RPS[$t,$c]}" "${P50[$t,$c]}" "${P99[$t,$c]}" "${CPU[$t,$c]}"
    done
done
echo
for c in $CONNECTIONS; do
    awk -v p="${RPS[platform,$c]}" -v n="${RPS[nginx,$c]}" -v h="${RPS[haproxy,$c]}" -v d="${RPS[direct,$c]}" \
        -v pl="${P99[platform,$c]}" -v nl="${P99[nginx,$c]}" -v hl="${P99[haproxy,$c]}" -v c="$c" 'BEGIN {
        best = n > h ? n : h; bestname = n > h ? "nginx" : "haproxy"; bestl = n > h ? nl : hl
        printf "c=%s: platform/%s (stronger peer) throughput %.3fx, p99 %.3fx; platform/direct %.3fx\n",
               c, bestname, p / best, pl / bestl, p / d
    }'
done

# RSS with 1,000 idle keep-alive clients.
python3 - "$PROXY_PORT" <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
socks = []
for _ in range(1000):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /_platform/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    socks.append(s)
for s in socks:
    s.recv(4096)
time.sleep(4)
PY
IDLE_PID=$!
sleep 3
echo "platform-proxy RSS with 1,000 idle keep-alive clients: $(rss_kb "$PROXY_PID") kB (peak $(peak_rss_kb "$PROXY_PID") kB)"
wait "$IDLE_PID" || true

# What libcurl alone costs per request: the upstream half of every forwarded request, measured
# with no server side at all (bench/curl-floor.c), next to the peers' whole per-request CPU.
CC_BIN="$(command -v cc || command -v clang || true)"
if [[ -n "$CC_BIN" ]] && "$CC_BIN" -O2 -o "$BENCH_DIR/curl-floor" "$BENCH_REPO_ROOT/bench/curl-floor.c" -lcurl 2>"$BENCH_DIR/cc.log"; then
    read -r _ requests _ errors _ floor_rps _ floor_user _ floor_sys < <("$BENCH_DIR/curl-floor" "${URL[direct]}" 64 5)
    awk -v u="$floor_user" -v s="$floor_sys" -v r="$floor_rps" -v n="${CPU[nginx,64]:-0}" -v h="${CPU[haproxy,64]:-0}" 'BEGIN {
        printf "libcurl alone (64 transfers, no server side): %.0f req/s on one thread, %.1f us CPU/request (user %.1f, system %.1f);\n", r, u + s, u, s
        printf "  the peers spend %.1f (nginx) and %.1f (haproxy) us per request for the whole proxy job at c=64\n", n, h
    }'
else
    bench_log "no C compiler (cc/clang): skipped the libcurl floor (bench/curl-floor.c)"
fi
