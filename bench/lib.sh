# shellcheck shell=bash
# Helpers for the benchmark scripts in bench/. Source it; do not run it.
#
#   source "$(dirname "$0")/lib.sh"
#   bench_init                      # temp dir + cleanup trap
#   ensure_tools nginx wrk          # runs scripts/setup.sh bench when a tool is missing
#   PROXY_BIN=$(build_release)
#   start_nginx PORT CONF_SNIPPET   # sets NGINX_PID
#   start_proxy BIN PORT CONFIG_JSON [NAME [ARGS...]]  # sets PROXY_PID
#   callgrind_proxy OUT PORT BIN [VALGRIND_OPTS...]    # the same under callgrind; sets CALLGRIND_PID
#   keepalive_gets PORT PATH COUNT [PATH COUNT...]    # GETs on one keep-alive connection, each 200
#   make_test_ca DIR                # throwaway CA + server cert for 127.0.0.1/localhost
#   start_bench_upstream http|https # nginx upstream for a proxy benchmark; sets UPSTREAM_URL
#   bench_proxy_config PORT URL     # the benchmarks' platform-proxy config (static token, no access log)
#   rss_tree_kb PID                 # RSS of PID and its children (nginx workers)
#   pss_tree_kb PID                 # the same as PSS (shared pages split among their mappers)
#   anon_tree_kb PID                # the same as RssAnon (private memory: heap, stacks, written data)
#   free_ports N                    # N distinct free loopback ports
#   run_wrk NAME URL                # wrk --latency, output saved as $BENCH_DIR/NAME.wrk
#   parse_wrk FILE                  # prints "rps p50_ms p99_ms errors"
#   results_markdown SUMMARY BUILD  # bench/RESULTS.md from bench/proxy.sh's summary (its table and targets)
#
# Knobs (environment): WRK_THREADS (2), WRK_CONNECTIONS (64), WRK_DURATION (10s).

BENCH_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRK_THREADS="${WRK_THREADS:-2}"
WRK_CONNECTIONS="${WRK_CONNECTIONS:-64}"
WRK_DURATION="${WRK_DURATION:-10s}"

BENCH_PIDS=()

bench_log() { printf '[bench] %s\n' "$*" >&2; }

bench_die() { bench_log "error: $*"; exit 1; }

# Temp dir and a trap that stops every process we started (by PID) and removes it.
bench_init() {
    BENCH_DIR="$(mktemp -d "${TMPDIR:-/tmp}/platform-proxy-bench.XXXXXX")"
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

bench_cleanup() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${BENCH_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [[ -n "${BENCH_DIR:-}" && -d "$BENCH_DIR" && -z "${BENCH_KEEP:-}" ]]; then
        rm -rf "$BENCH_DIR"
    fi
}

# ensure_tools nginx wrk: the project setup installs the peers when a command is missing.
ensure_tools() {
    local missing=() tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    ((${#missing[@]})) || return 0
    # The project's setup installs every peer the benchmarks use, the Debian way (no service
    # is started or stopped); it needs root or sudo like any apt-get.
    bench_log "missing ${missing[*]}: running scripts/setup.sh bench"
    "$BENCH_REPO_ROOT/scripts/setup.sh" bench >&2 || bench_die "scripts/setup.sh bench failed"
    for tool in "${missing[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || bench_die "could not install $tool"
    done
}

# build_release: prints the release binary's path: the build that ships (`make release`, the
# Docker image), with the Swift standard library linked statically. PLATFORM_PROXY_RELEASE_BIN
# skips the build; SWIFT_SCRATCH_PATH picks the build directory (default .build/bench-release,
# apart from `swift build`'s own, which links the standard library dynamically).
build_release() {
    if [[ -n "${PLATFORM_PROXY_RELEASE_BIN:-}" ]]; then
        [[ -x "$PLATFORM_PROXY_RELEASE_BIN" ]] || bench_die "PLATFORM_PROXY_RELEASE_BIN=$PLATFORM_PROXY_RELEASE_BIN is not executable"
        echo "$PLATFORM_PROXY_RELEASE_BIN"
        return
    fi
    local scratch="${SWIFT_SCRATCH_PATH:-$BENCH_REPO_ROOT/.build/bench-release}"
    bench_log "swift build -c release -Xswiftc -static-stdlib (scratch path $scratch)"
    (cd "$BENCH_REPO_ROOT" && swift build -c release -Xswiftc -static-stdlib --scratch-path "$scratch" >&2) \
        || bench_die "release build failed"
    local bin
    bin="$(cd "$BENCH_REPO_ROOT" && swift build -c release -Xswiftc -static-stdlib --scratch-path "$scratch" --show-bin-path)/platform-proxy"
    [[ -x "$bin" ]] || bench_die "no binary at $bin"
    echo "$bin"
}

# free_port: an unused loopback TCP port.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# free_ports N: N distinct unused loopback TCP ports on one line (all held open while chosen, so
# they cannot repeat, as separate free_port calls can).
free_ports() {
    python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])' "$1"
}

# wait_http URL [seconds]: until URL answers 2xx.
wait_http() {
    local url="$1" seconds="${2:-10}" i
    for ((i = 0; i < seconds * 20; i++)); do
        curl -sf -o /dev/null --max-time 1 "$url" && return 0
        sleep 0.05
    done
    return 1
}

# start_nginx PORT [LOCATION_BODY]: nginx on 127.0.0.1:PORT with its own prefix, pid and logs
# under $BENCH_DIR/$NGINX_NAME (default nginx). LOCATION_BODY is the inside of "location / { ... }"
# (default: return the health JSON). Extra http-level config can be given in NGINX_HTTP_EXTRA;
# NGINX_WORKERS sets its worker processes (default: one per CPU). Sets NGINX_PID.
start_nginx() {
    local port="$1"
    local location="${2:-default_type application/json; return 200 '{\"status\":\"ok\"}';}"
    local dir="$BENCH_DIR/${NGINX_NAME:-nginx}"
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
worker_processes ${NGINX_WORKERS:-auto};
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    ${NGINX_HTTP_EXTRA:-}
    server {
        listen 127.0.0.1:$port;
        location / { $location }
    }
}
EOF
    nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    BENCH_PIDS+=("$NGINX_PID")
    wait_http "http://127.0.0.1:$port/" 10 || { cat "$dir/logs/error.log" >&2; bench_die "nginx did not start"; }
    bench_log "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') on 127.0.0.1:$port (pid $NGINX_PID)"
}

# callgrind_proxy OUT PORT BIN [VALGRIND_OPTION...]: BIN serving $BENCH_DIR/proxy.json (which
# listens on PORT) under callgrind, its profile to OUT and its log to OUT.log; returns once the
# health check answers. Sets CALLGRIND_PID: `kill -TERM` it and `wait` for the profile.
# GNUTLS_NO_IMPLICIT_INIT is set as `serve` sets it for itself by starting again
# (Sources/platform-proxy/GnuTLSRestart.swift), which would leave valgrind.
callgrind_proxy() {
    local out="$1" port="$2" binary="$3"
    shift 3
    GNUTLS_NO_IMPLICIT_INIT=1 valgrind --tool=callgrind "$@" --callgrind-out-file="$out" "$binary" serve --config "$BENCH_DIR/proxy.json" \
        --log-level "${CALLGRIND_LOG_LEVEL:-error}" 2>"$out.log" &
    CALLGRIND_PID=$!
    BENCH_PIDS+=("$CALLGRIND_PID")
    wait_http "http://127.0.0.1:$port/_platform/health" 60 || bench_die "proxy under valgrind did not start"
}

# keepalive_gets PORT PATH COUNT [PATH COUNT...]: COUNT keep-alive GETs of each PATH in turn, on
# one connection, each answered 200. KEEPALIVE_HEADERS (a JSON object) adds request fields.
keepalive_gets() {
    python3 - "$@" <<'PY'
import http.client, json, os, sys
port, plan = int(sys.argv[1]), sys.argv[2:]
headers = json.loads(os.environ.get("KEEPALIVE_HEADERS") or "{}")
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for path, count in zip(plan[::2], plan[1::2]):
    for _ in range(int(count)):
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        assert r.status == 200, (path, r.status)
PY
}

# start_proxy BIN PORT CONFIG_JSON [NAME [SERVE_ARGS...]]: platform-proxy serve with that config
# (written to $BENCH_DIR/NAME.json, default proxy.json: a file per instance, since the proxy
# watches its config file); stderr goes to /dev/null unless PROXY_LOG is set to a file.
# Sets PROXY_PID.
start_proxy() {
    local bin="$1" port="$2" config="$3" name="${4:-proxy}"
    shift $(($# < 4 ? $# : 4))
    printf '%s\n' "$config" >"$BENCH_DIR/$name.json"
    "$bin" serve --config "$BENCH_DIR/$name.json" "$@" 2>"${PROXY_LOG:-/dev/null}" >/dev/null &
    PROXY_PID=$!
    BENCH_PIDS+=("$PROXY_PID")
    wait_http "http://127.0.0.1:$port/_platform/health" 10 || bench_die "platform-proxy did not start (set PROXY_LOG=file to see its log)"
    bench_log "platform-proxy on 127.0.0.1:$port (pid $PROXY_PID)"
}

# run_wrk NAME URL [extra wrk args...]: saves the output as $BENCH_DIR/NAME.wrk, prints its path.
run_wrk() {
    local name="$1" url="$2"
    shift 2
    local out="$BENCH_DIR/$name.wrk"
    wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WRK_DURATION" --latency "$@" "$url" >"$out" 2>&1 \
        || { cat "$out" >&2; bench_die "wrk failed for $name"; }
    echo "$out"
}

# parse_wrk FILE: "rps p50_ms p99_ms errors" (errors = socket errors + non-2xx/3xx responses).
parse_wrk() {
    awk '
        function ms(v) {
            if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
            if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
            if (v ~ /m$/)  { sub(/m$/, "", v);  return v * 60000 }
            if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
            return v + 0
        }
        /Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = ms($2) }
        $1 == "99%" { p99 = ms($2) }
        /Socket errors:/ {
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) { n = $i; sub(/,/, "", n); errors += n }
        }
        /Non-2xx or 3xx responses:/ { errors += $NF }
        END { printf "%.0f %.3f %.3f %d\n", rps, p50, p99, errors }
    ' "$1"
}

# wrk_requests FILE: the number of requests wrk completed.
wrk_requests() { awk '/requests in/ { print $1 }' "$1"; }

# cpu_ticks PID...: user + system clock ticks used so far by these processes, their threads and
# their direct children (nginx workers). Differences over a run give CPU per request.
cpu_ticks() {
    local pid child task total=0 ticks
    for pid in "$@"; do
        for child in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
            for task in /proc/"$child"/task/*; do
                # Fields after "pid (comm) ": utime and stime are the 12th and 13th.
                ticks=$(sed 's/.*) //' "$task/stat" 2>/dev/null | awk '{ print $12 + $13 }') || continue
                total=$((total + ${ticks:-0}))
            done
        done
    done
    echo "$total"
}

# ticks_to_us_per_request TICKS REQUESTS: microseconds of CPU per request.
ticks_to_us_per_request() {
    awk -v t="$1" -v r="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (r > 0 ? t * 1e6 / hz / r : 0) }'
}

# rss_kb PID: resident set size in kB (VmRSS); peak_rss_kb PID: VmHWM.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
peak_rss_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# tree_pids PID: PID and its child processes (nginx's workers), from /proc/PID/task/*/children.
tree_pids() {
    echo "$1"
    cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -v '^$' || true
}

# tree_sum_kb PID FILE FIELD: the kB value of FIELD (e.g. "VmRSS:") in /proc/P/FILE, summed over
# PID and its child processes.
tree_sum_kb() {
    local pid total=0 kb
    for pid in $(tree_pids "$1"); do
        kb=$(awk -v f="$3" '$1 == f { print $2 }' "/proc/$pid/$2" 2>/dev/null) || kb=0
        total=$((total + ${kb:-0}))
    done
    echo "$total"
}

# rss_tree_kb PID: VmRSS summed over PID and its child processes, in kB.
rss_tree_kb() { tree_sum_kb "$1" status VmRSS:; }
# pss_tree_kb PID: proportional set size (shared pages divided among the processes that map them).
pss_tree_kb() { tree_sum_kb "$1" smaps_rollup Pss:; }
# anon_tree_kb PID: RssAnon (anonymous pages: heap, stacks, relocated data; no file pages).
anon_tree_kb() { tree_sum_kb "$1" status RssAnon:; }

# start_bench_upstream http|https: nginx answering every request with a small JSON body, plainly
# or (https) over TLS with h2 by ALPN and a private CA made here, which libcurl is told to trust
# through CURL_CA_BUNDLE. Sets UPSTREAM_URL (and NGINX_PID).
start_bench_upstream() {
    local port tls_port
    read -r port tls_port <<<"$(free_ports 2)"
    UPSTREAM_URL="http://127.0.0.1:$port/"
    local extra="" workers="${NGINX_WORKERS:-auto}"
    if [[ $1 == https ]]; then
        ensure_tools openssl
        make_test_ca "$BENCH_DIR/tls"
        UPSTREAM_URL="https://127.0.0.1:$tls_port/"
        export CURL_CA_BUNDLE="$BENCH_DIR/tls/ca.pem"
        extra="server {
        listen 127.0.0.1:$tls_port ssl http2;
        ssl_certificate $BENCH_DIR/tls/server.pem;
        ssl_certificate_key $BENCH_DIR/tls/server.key;
        location / { default_type application/json; return 200 '{\"status\":\"ok\"}'; }
    }"
        # One worker: a proxy multiplexing over h2 holds one or two upstream connections, and
        # with two workers whether they share one decides its result (bench/proxy.sh).
        workers="${NGINX_WORKERS:-1}"
    fi
    NGINX_WORKERS="$workers" NGINX_HTTP_EXTRA="$extra" start_nginx "$port" "default_type application/json; return 200 '{\"status\":\"ok\"}';"
}

# bench_proxy_config PORT UPSTREAM_URL: the benchmarks' platform-proxy config: one listener, a
# route with a static token to UPSTREAM_URL, access log off (PROXY_LOG_KEY= leaves the "log" key
# out, for binaries older than it), PROXY_WORKERS loops (0: one per CPU).
bench_proxy_config() {
    cat <<JSON
{
  "listen": ["127.0.0.1:$1"],
  "workers": ${PROXY_WORKERS:-0},
  ${PROXY_LOG_KEY-"\"log\": {\"access\": false},"}
  "provider": {"grant": "static", "accessToken": "${TOKEN:-bench-token-0123456789abcdef}"},
  "limits": {"maxConnections": 20000},
  "routes": [{"name": "bench", "path": "/", "upstream": "$2", "credential": "access_token"}]
}
JSON
}

# make_test_ca DIR: a throwaway CA (DIR/ca.pem) and a server certificate for 127.0.0.1 and
# localhost signed by it (DIR/server.pem, DIR/server.key), as Tests/Integration/test_tls_upstream.py.
make_test_ca() {
    local dir="$1"
    mkdir -p "$dir"
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
        "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$dir/san.ext"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 \
            -subj "/CN=platform-proxy bench CA" &&
        openssl req -newkey rsa:2048 -nodes -keyout "$dir/server.key" -out "$dir/server.csr" -subj "/CN=127.0.0.1" &&
        openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
            -out "$dir/server.pem" -days 2 -extfile "$dir/san.ext"
    } >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; bench_die "openssl could not make the test CA"; }
}

# results_markdown SUMMARY BUILD: prints bench/RESULTS.md from the summary bench/proxy.sh prints at
# its end (the "== Markdown" table, then the "== Issue 13 targets" lines up to the closing line).
# BUILD is one line saying what was measured (commit, libcurl, CPUs, rounds). Only the latest run
# is kept: earlier runs live in git.
results_markdown() {
    local summary=$1 build=$2
    printf '# Latest benchmark results\n\n'
    printf 'Written by `bench/proxy.sh` at the end of its last run (rerun it to replace this file; how to\n'
    printf 'read the columns and targets: [docs/performance.md](../docs/performance.md)). %s\n\n' "$build"
    awk '/^== Markdown/ { on = 1; next } on && /^\|/ { print; next } on { exit }' "$summary"
    printf '\n## Targets\n\n```text\n'
    awk '/^== Issue 13 targets/ { on = 1 } on { print }' "$summary"
    printf '```\n'
}
