#!/usr/bin/env bash
# Where one request's time goes at c=1, phase by phase, for platform-proxy and floor-proxy
# (bench/floor-proxy.c, the same job in lean C on libcurl) side by side: which of it is on the
# client's round trip (wrk waits for it) and which is done while the client is away.
#
# Each proxy's system calls are traced (`perf record` of raw_syscalls enter and exit, no CPU
# samples) while wrk -t1 -c1 drives it, and each request is cut at its system calls: the client's
# socket is read with read(2) and written with write(2) or writev(2), the upstream's with
# sendto(2) and recvfrom(2) (libcurl's send and recv), the waits are epoll's. Per request:
#
#   in        wake-up for the client's request to the upstream send: parse, route, headers,
#             libcurl's connection choice and request (and, for h2/TLS, framing and encryption)
#   upstream  the upstream send to the wake-up for its answer (nginx's time; off the proxy's CPU)
#   out       that wake-up to the client write: decryption, libcurl's response parsing, our
#             header callbacks and response head
#   after     the client write to the next wait (the transfer's completion, our bookkeeping):
#             off the round trip unless the client's next request comes before it ends
#   idle      the next wait, until the client's next request
#
# "in + out" is what the proxy adds to a round trip at c=1. Tracing makes every system call
# slower (about 1 µs each, the same for both proxies), so compare the two columns, not a column
# with a timed run. Medians over every traced request.
#
#   bench/phases.sh                          # plain and https upstreams, 4 s each
#   UPSTREAMS=https SECONDS_=6 bench/phases.sh
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy bench/phases.sh   # skip the build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION="${SECONDS_:-4}"
UPSTREAMS="${UPSTREAMS:-http https}"

bench_init
ensure_tools nginx wrk perf
PROXY_BIN="$(build_release)"
CC_BIN="$(command -v cc || command -v clang || true)"
[[ -n "$CC_BIN" ]] && "$CC_BIN" -O2 -o "$BENCH_DIR/floor-proxy" "$BENCH_REPO_ROOT/bench/floor-proxy.c" -lcurl -lpthread 2>"$BENCH_DIR/cc.log" \
    || bench_die "floor-proxy did not build (see $BENCH_DIR/cc.log; needs a C compiler and libcurl's headers)"

# phases TRACE: one line per phase, "name median_us mean_us count".
phases() {
    python3 - "$1" <<'PY'
import re, statistics, sys
CLIENT_READ, CLIENT_WRITES, SEND, RECV = {0}, {1, 20}, {44}, {45}
EPOLL = {232, 281, 441}  # epoll_wait, epoll_pwait, epoll_pwait2
event = re.compile(r"\s(\d+)\s+\[\d+\]\s+([\d.]+):\s+raw_syscalls:sys_(enter|exit):\s+NR (\d+)")
threads = {}
out = {k: [] for k in ("in", "upstream", "out", "after", "idle")}
for line in open(sys.argv[1]):
    m = event.search(line)
    if not m:
        continue
    tid, t, kind, nr = int(m.group(1)), float(m.group(2)) * 1e6, m.group(3), int(m.group(4))
    s = threads.setdefault(tid, {"state": "idle", "woke": None})
    if kind == "exit" and nr in EPOLL:
        s["woke"] = t
    elif kind == "exit" and nr in CLIENT_READ and s["state"] == "idle" and s["woke"] is not None:
        if "write_done" in s:
            out["idle"].append(s["woke"] - s.pop("wait_began"))
            s.pop("write_done")
        s.update(state="reading", begun=s["woke"])
    elif kind == "enter" and nr in SEND and s["state"] == "reading":
        out["in"].append(t - s["begun"])
        s.update(state="sent", sent=t)
    elif kind == "enter" and nr in EPOLL and s["state"] == "sent":
        s["state"] = "awaiting"
        s["await_began"] = t
    elif kind == "enter" and nr in RECV and s["state"] == "awaiting" and s["woke"] is not None and s["woke"] > s["await_began"]:
        out["upstream"].append(s["woke"] - s["await_began"])
        s.update(state="answering", answering=s["woke"])
    elif kind == "enter" and nr in CLIENT_WRITES and s["state"] == "answering":
        out["out"].append(t - s["answering"])
        s.update(state="written", written=t)
    elif kind == "enter" and nr in EPOLL and s["state"] == "written":
        out["after"].append(t - s["written"])
        s.update(state="idle", wait_began=t, write_done=True)
for name, values in out.items():
    if values:
        print(name, f"{statistics.median(values):.1f}", f"{statistics.fmean(values):.1f}", len(values))
    else:
        print(name, "-", "-", 0)
PY
}

# trace TARGET PID PORT: traces PID while wrk -t1 -c1 drives PORT; prints wrk's p50 (ms) and the phases.
trace() {
    local target="$1" pid="$2" port="$3"
    wrk -t1 -c1 -d2s "http://127.0.0.1:$port/" >/dev/null
    perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -p "$pid" -o "$BENCH_DIR/$target.data" \
        -- sleep "$((DURATION + 1))" >"$BENCH_DIR/$target.perf.log" 2>&1 &
    local perf_pid=$!
    sleep 0.3
    local out
    out="$(wrk -t1 -c1 -d"${DURATION}s" --latency "http://127.0.0.1:$port/")"
    wait "$perf_pid" || { cat "$BENCH_DIR/$target.perf.log" >&2; bench_die "perf record failed"; }
    perf script -i "$BENCH_DIR/$target.data" >"$BENCH_DIR/$target.txt" 2>/dev/null
    echo "p50 $(awk '/ 50%/ { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) sub(/ms/, "", v); print v }' <<<"$out")"
    phases "$BENCH_DIR/$target.txt"
}

for upstream in $UPSTREAMS; do
    start_bench_upstream "$upstream"
    port="$(free_port)"
    start_proxy "$PROXY_BIN" "$port" "$(bench_proxy_config "$port" "$UPSTREAM_URL")" "phases-$upstream" --log-level warning
    floor_port="$(free_port)"
    "$BENCH_DIR/floor-proxy" "$floor_port" "$UPSTREAM_URL" "$(nproc)" >"$BENCH_DIR/floor-$upstream.log" 2>&1 &
    floor_pid=$!
    BENCH_PIDS+=("$floor_pid")
    wait_http "http://127.0.0.1:$floor_port/" 10 || bench_die "floor-proxy did not start"
    trace "platform-$upstream" "$PROXY_PID" "$port" >"$BENCH_DIR/platform-$upstream.phases"
    trace "floor-$upstream" "$floor_pid" "$floor_port" >"$BENCH_DIR/floor-$upstream.phases"
    echo "== $upstream upstream, wrk -t1 -c1 ${DURATION}s each, system calls traced (medians, us per request)"
    printf '  %-10s %12s %12s %12s\n' phase platform floor difference
    join <(sort "$BENCH_DIR/platform-$upstream.phases") <(sort "$BENCH_DIR/floor-$upstream.phases") | awk '
        { row[$1] = $0 }
        END {
            n = split("p50 in upstream out after idle", order, " ")
            for (i = 1; i <= n; i++) {
                split(row[order[i]], f, " ")
                if (order[i] == "p50") { printf "  %-10s %9.1f us %9.1f us %+9.1f us   (wrk, traced)\n", "p50", f[2] * 1000, f[3] * 1000, (f[2] - f[3]) * 1000; continue }
                printf "  %-10s %12.1f %12.1f %+12.1f   (%d, %d requests)\n", order[i], f[2], f[5], f[2] - f[5], f[4], f[7]
                if (order[i] == "in" || order[i] == "out") { mine += f[2]; theirs += f[5] }
            }
            printf "  %-10s %12.1f %12.1f %+12.1f   (on the round trip)\n", "in + out", mine, theirs, mine - theirs
        }'
    kill -TERM "$PROXY_PID" "$floor_pid" "$NGINX_PID" 2>/dev/null || true
    wait "$PROXY_PID" "$floor_pid" 2>/dev/null || true
done
