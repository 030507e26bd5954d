#!/usr/bin/env bash
# Where the proxy's CPU goes under load, kernel included: `perf record` (cpu-clock samples) of the
# release proxy while wrk drives it at c=64, reported by shared object (kernel, libcurl, libc,
# OpenSSL, nghttp2, the binary itself) and by symbol. bench/cost-profile.sh counts instructions in
# user space only; this adds the kernel's share (sockets, epoll) and the time, not the count.
#
# The same is measured for bench/floor-proxy.c (the job in lean C on libcurl) in alternating
# rounds, and each shared object's share is turned into microseconds per request for both, side
# by side with context switches per request: what platform-proxy spends above the floor, and where.
# (libcurl, libc and the kernel run the same calls for both; when they take longer for
# platform-proxy, its own code's footprint in the caches is what differs.)
#
# The job is bench/proxy.sh's: a credentialed route (static token) to nginx, access log off.
#
#   bench/perf-split.sh                     # plain upstream, 2 rounds of 8 s each
#   UPSTREAM=https bench/perf-split.sh      # nginx over TLS (h2), CURL_CA_BUNDLE a private CA
#   SECONDS_=5 ROUNDS=3 TOP=30 bench/perf-split.sh
#   BENCH_FLOOR=0 bench/perf-split.sh       # platform-proxy only
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy bench/perf-split.sh   # skip the build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION="${SECONDS_:-8}"
ROUNDS="${ROUNDS:-2}"
TOP="${TOP:-25}"
UPSTREAM="${UPSTREAM:-http}"
BENCH_FLOOR="${BENCH_FLOOR:-1}"

bench_init
ensure_tools nginx wrk perf
PROXY_BIN="$(build_release)"

PROXY_PORT="$(free_port)"
start_bench_upstream "$UPSTREAM"
start_proxy "$PROXY_BIN" "$PROXY_PORT" "$(bench_proxy_config "$PROXY_PORT" "$UPSTREAM_URL")" perf-proxy --log-level warning
targets=(platform)
declare -A PID=([platform]="$PROXY_PID") PORT=([platform]="$PROXY_PORT")

CC_BIN="$(command -v cc || command -v clang || true)"
if [[ $BENCH_FLOOR == 1 && -n "$CC_BIN" ]] \
    && "$CC_BIN" -O2 -o "$BENCH_DIR/floor-proxy" "$BENCH_REPO_ROOT/bench/floor-proxy.c" -lcurl -lpthread 2>"$BENCH_DIR/cc.log"; then
    PORT[floor]="$(free_port)"
    "$BENCH_DIR/floor-proxy" "${PORT[floor]}" "$UPSTREAM_URL" "$(nproc)" >"$BENCH_DIR/floor.log" 2>&1 &
    PID[floor]=$!
    BENCH_PIDS+=("${PID[floor]}")
    wait_http "http://127.0.0.1:${PORT[floor]}/" 10 || bench_die "floor-proxy did not start"
    targets+=(floor)
elif [[ $BENCH_FLOOR == 1 ]]; then
    bench_log "no C compiler or libcurl headers (see $BENCH_DIR/cc.log): platform-proxy only"
fi

# switches PID: voluntary + involuntary context switches of PID's threads so far.
switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

declare -A REQ=() TICKS=() SW=() RPS=()
for target in "${targets[@]}"; do WRK_DURATION=2s run_wrk warm "http://127.0.0.1:${PORT[$target]}/" >/dev/null; done
for round in $(seq "$ROUNDS"); do
    for target in "${targets[@]}"; do
        pid="${PID[$target]}"
        perf record -q -e cpu-clock -F 1999 -p "$pid" -o "$BENCH_DIR/perf-$target-$round.data" -- sleep "$((DURATION + 1))" \
            >"$BENCH_DIR/perf-$target.log" 2>&1 &
        perf_pid=$!
        sleep 0.3
        ticks_before=$(cpu_ticks "$pid"); switches_before=$(switches "$pid")
        out="$(WRK_DURATION="${DURATION}s" run_wrk "$target-$round" "http://127.0.0.1:${PORT[$target]}/")"
        ticks_after=$(cpu_ticks "$pid"); switches_after=$(switches "$pid")
        wait "$perf_pid" || { cat "$BENCH_DIR/perf-$target.log" >&2; bench_die "perf record failed"; }
        n="$(wrk_requests "$out")"
        REQ[$target]=$(( ${REQ[$target]:-0} + n ))
        TICKS[$target]=$(( ${TICKS[$target]:-0} + ticks_after - ticks_before ))
        SW[$target]=$(( ${SW[$target]:-0} + switches_after - switches_before ))
        read -r rps _ <<<"$(parse_wrk "$out")"
        RPS[$target]="${RPS[$target]:-}${RPS[$target]:+ }$rps"
    done
done

# shares TARGET: "dso percent" lines over all of TARGET's rounds.
shares() {
    local files=("$BENCH_DIR"/perf-"$1"-*.data) f
    for f in "${files[@]}"; do
        perf report -i "$f" --sort dso --stdio 2>/dev/null | awk '/^ +[0-9.]+%/ { sub(/%/, "", $1); print $2, $1 }'
    done | awk -v rounds="${#files[@]}" '{ s[$1] += $2 } END { for (d in s) printf "%s %.2f\n", d, s[d] / rounds }'
}

echo "== $UPSTREAM upstream, wrk -t$WRK_THREADS -c$WRK_CONNECTIONS, $ROUNDS round(s) of ${DURATION}s, alternating"
for target in "${targets[@]}"; do
    printf '%-9s req/s %s; CPU %s us/request; %.2f context switches per request\n' "$target" "${RPS[$target]}" \
        "$(ticks_to_us_per_request "${TICKS[$target]}" "${REQ[$target]}")" \
        "$(awk -v s="${SW[$target]}" -v n="${REQ[$target]}" 'BEGIN { print (n > 0 ? s / n : 0) }')"
done
echo "-- CPU per request by shared object (us; the share of perf's samples times CPU per request)"
binary="$(basename "$PROXY_BIN")"
for target in "${targets[@]}"; do
    us="$(ticks_to_us_per_request "${TICKS[$target]}" "${REQ[$target]}")"
    # Each proxy's own binary is "ours".
    shares "$target" | awk -v t="$target" -v us="$us" -v bin="$binary" '{
        d = $1; if (d == bin || d == "floor-proxy") d = "ours"; printf "%s %s %.1f\n", t, d, $2 * us / 100 }'
done >"$BENCH_DIR/split.txt"
printf '  %-22s %10s %10s %10s\n' "shared object" platform floor difference
awk '{ v[$2, $1] = $3; dsos[$2] = 1; ts[$1] = 1 }
    END {
        for (d in dsos) if (v[d, "platform"] + v[d, "floor"] >= 0.3)
            printf "  %-22s %10.1f %10s %10s\n", d, v[d, "platform"], ("floor" in ts) ? sprintf("%.1f", v[d, "floor"]) : "-",
                ("floor" in ts) ? sprintf("%+.1f", v[d, "platform"] - v[d, "floor"]) : "-"
    }' "$BENCH_DIR/split.txt" | sort -k2,2 -g -r
echo "-- platform-proxy's top $TOP symbols (round 1)"
perf report -i "$BENCH_DIR/perf-platform-1.data" --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | awk -v n="$TOP" 'NR <= n' \
    | swift demangle --simplified --compact 2>/dev/null | cut -c1-150
