#!/usr/bin/env bash
# What an HTTP/2 upstream that ends each connection after a few requests (GOAWAY) costs the
# clients: nginx over TLS with `keepalive_requests` KEEPALIVE_REQUESTS (nginx's default is 1,000),
# platform-proxy forwarding wrk's load to it at each of CONNECTIONS, and the answers that were not
# 2xx (wrk's non-2xx responses and socket errors). The streams beyond the last one the upstream takes are refused; libcurl sends them again on
# a new connection (up to five times), the proxy once more (docs/forwarding.md, "A pooled upstream connection
# closed while idle"). Every request waiting goes to the one new connection, so an upstream that
# allows fewer requests per connection than there are in flight refuses most of them each time.
#
#   bench/goaway.sh                                   # KEEPALIVE_REQUESTS="1000 100 50 30", c=64 and 256
#   KEEPALIVE_REQUESTS=15 CONNECTIONS=64 bench/goaway.sh
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy bench/goaway.sh   # skip the build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KEEPALIVE_REQUESTS="${KEEPALIVE_REQUESTS:-1000 100 50 30}"
CONNECTIONS="${CONNECTIONS:-64 256}"
DURATION="${DURATION:-4s}"

bench_init
ensure_tools nginx wrk openssl
PROXY_BIN="$(build_release)"
make_test_ca "$BENCH_DIR/tls"
export CURL_CA_BUNDLE="$BENCH_DIR/tls/ca.pem"

printf '%-20s %6s %10s %8s\n' keepalive_requests conns requests "not 2xx"
for requests in $KEEPALIVE_REQUESTS; do
    read -r port tls_port proxy_port <<<"$(free_ports 3)"
    NGINX_NAME="nginx-$requests" NGINX_WORKERS=1 NGINX_HTTP_EXTRA="server {
        listen 127.0.0.1:$tls_port ssl http2;
        keepalive_requests $requests;
        ssl_certificate $BENCH_DIR/tls/server.pem;
        ssl_certificate_key $BENCH_DIR/tls/server.key;
        location / { default_type application/json; return 200 '{\"status\":\"ok\"}'; }
    }" start_nginx "$port"
    start_proxy "$PROXY_BIN" "$proxy_port" "$(bench_proxy_config "$proxy_port" "https://127.0.0.1:$tls_port/")" \
        "proxy-$requests" --log-level error
    for c in $CONNECTIONS; do
        out="$(WRK_CONNECTIONS=$c WRK_DURATION=$DURATION run_wrk "goaway-$requests-$c" "http://127.0.0.1:$proxy_port/")"
        read -r _ _ _ errors < <(parse_wrk "$out")
        printf '%-20s %6s %10s %8s\n' "$requests" "$c" "$(wrk_requests "$out")" "$errors"
    done
    # This pair's processes only, by PID (the rest are bench_cleanup's at exit).
    kill -TERM "$PROXY_PID" "$NGINX_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
done
