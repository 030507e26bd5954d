#!/usr/bin/env bash
# WebSocket tunnels: messages per second and proxy CPU per message through platform-proxy and
# through nginx (`proxy_set_header Upgrade`) in front of the same echo upstream, and the RSS one
# idle tunnel costs platform-proxy. Not a timed test: run it on a quiet machine.
#
#   bench/websocket.sh                  # release build (or PLATFORM_PROXY_RELEASE_BIN), 64 connections, 10 s
#   WS_CONNECTIONS=16 WS_SECONDS=5 WS_SIZE=128 WS_IDLE=1000 bench/websocket.sh
#   WS_RESULTS=bench/WEBSOCKETS.md bench/websocket.sh   # also writes the table there
#
# Targets (issue 42): at least 0.8 x nginx's message rate; at most 16 KiB per idle tunnel.
# The peers are Python (`websockets`, Tests/Integration/requirements.txt): the rate is the
# peers' as much as the proxy's, so CPU per message (the proxy's own CPU time over the messages
# it carried) is the figure that compares the two proxies.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

WS_CONNECTIONS="${WS_CONNECTIONS:-64}"
WS_SECONDS="${WS_SECONDS:-10}"
WS_SIZE="${WS_SIZE:-128}"
WS_IDLE="${WS_IDLE:-1000}"
# The project's .venv (make setup installs websockets there), else the system python3.
PYTHON="${PYTHON:-$([[ -x "$BENCH_REPO_ROOT/.venv/bin/python" ]] && echo "$BENCH_REPO_ROOT/.venv/bin/python" || echo python3)}"
PEER="$(dirname "$0")/websocket_peer.py"

bench_init
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
ensure_tools nginx
"$PYTHON" -c 'import websockets' 2>/dev/null || bench_die "$PYTHON has no websockets module (pip install websockets)"
PROXY_BIN=$(build_release)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

read -r up_port nginx_port proxy_port <<<"$(free_ports 3)"
"$PYTHON" "$PEER" serve "$up_port" &
BENCH_PIDS+=("$!")
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$up_port") 2>/dev/null && break; sleep 0.05; done

NGINX_WORKERS=1 NGINX_HTTP_EXTRA="map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }" \
    start_nginx "$nginx_port" "proxy_pass http://127.0.0.1:$up_port; proxy_http_version 1.1;
        proxy_set_header Upgrade \$http_upgrade; proxy_set_header Connection \$connection_upgrade;
        proxy_read_timeout 3600s; proxy_buffering off;"
start_proxy "$PROXY_BIN" "$proxy_port" "{\"listen\":[\"127.0.0.1:$proxy_port\"],\"workers\":1,\"routes\":[{\"name\":\"ws\",\"path\":\"/\",\"upstream\":\"http://127.0.0.1:$up_port\"}]}"

# cpu_ticks PID: user + system clock ticks of PID and its children.
cpu_ticks() {
    local total=0 pid
    for pid in "$1" $(pgrep -P "$1" 2>/dev/null); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

# measure NAME PORT PID: prints "name messages/s cpu-us/message".
measure() {
    local name="$1" port="$2" pid="$3" before after out
    before=$(cpu_ticks "$pid")
    out=$("$PYTHON" "$PEER" load "ws://127.0.0.1:$port/" "$WS_CONNECTIONS" "$WS_SECONDS" "$WS_SIZE")
    after=$(cpu_ticks "$pid")
    local hz
    hz=$(getconf CLK_TCK)
    read -r messages seconds <<<"$out"
    awk -v n="$name" -v m="$messages" -v s="$seconds" -v t=$((after - before)) -v hz="$hz" \
        'BEGIN { printf "%s %.0f %.2f\n", n, m / s, (t / hz) * 1e6 / (m > 0 ? m : 1) }'
}

bench_log "ping-pong: $WS_CONNECTIONS connections, $WS_SECONDS s, $WS_SIZE-byte messages"
nginx_line=$(measure nginx "$nginx_port" "$NGINX_PID")
proxy_line=$(measure platform-proxy "$proxy_port" "$PROXY_PID")

bench_log "idle tunnels: $WS_IDLE"
rss_before=$(rss_tree_kb "$PROXY_PID")
coproc IDLE { "$PYTHON" "$PEER" idle "ws://127.0.0.1:$proxy_port/" "$WS_IDLE"; }
read -r ready <&"${IDLE[0]}"
[[ $ready == open ]] || bench_die "the idle peer did not open its tunnels"
sleep 1
rss_after=$(rss_tree_kb "$PROXY_PID")
exec {IDLE[1]}>&-
wait "$IDLE_PID" 2>/dev/null || true

report() {
    printf '| proxy | messages/s | CPU µs/message |\n|---|---|---|\n'
    for line in "$nginx_line" "$proxy_line"; do
        read -r name rate cpu <<<"$line"
        printf '| %s | %s | %s |\n' "$name" "$rate" "$cpu"
    done
    read -r _ nginx_rate _ <<<"$nginx_line"
    read -r _ proxy_rate _ <<<"$proxy_line"
    awk -v p="$proxy_rate" -v n="$nginx_rate" 'BEGIN { printf "\nRate vs nginx: %.2fx (target >= 0.8x).\n", p / (n > 0 ? n : 1) }'
    awk -v a="$rss_after" -v b="$rss_before" -v c="$WS_IDLE" \
        'BEGIN { printf "RSS per idle tunnel: %.1f KiB (%d KiB for %d; target <= 16 KiB).\n", (a - b) / c, a - b, c }'
}

echo
report
if [[ -n "${WS_RESULTS:-}" ]]; then
    {
        printf '# WebSocket tunnels: latest bench/websocket.sh run\n\n'
        printf 'Ping-pong on %s connections for %s s with %s-byte messages, one worker each, Python\n' \
            "$WS_CONNECTIONS" "$WS_SECONDS" "$WS_SIZE"
        printf '`websockets` peers on %s CPUs (%s); load average before the run: %s.\n\n' \
            "$(nproc)" "$(uname -r)" "$LOAD_BEFORE"
        report
    } >"$WS_RESULTS"
    bench_log "wrote $WS_RESULTS"
fi
