#!/usr/bin/env bash
# What masking echoed credentials costs on the forwarding path, in instructions (callgrind),
# not wall-clock time: the count does not depend on what else the machine runs.
#
# The release proxy (one loop) forwards N keep-alive GETs to nginx with a static token, with
# `maskEchoedCredentials` on and off, for two N; the difference between the two N divided by
# the difference in requests is the cost per request without start-up. Bodies: the proxy
# benchmark's 15-byte JSON and a 4 KiB JSON (neither echoes the token: the common case), and
# the 4 KiB JSON compressed: asked for with `Accept-Encoding: gzip` from an upstream that
# compresses when asked (masking on asks for identity: the upstream's uncompressed bytes are
# masked; off, its gzip is relayed), and from one that always sends gzip (masking on: libcurl
# decodes it before the masker; off: relayed as it came).
#
#   bench/mask-cost.sh            # N = 300 and 1300
#   N1=500 N2=2500 bench/mask-cost.sh
#   BASE_BIN=/path/to/older/platform-proxy bench/mask-cost.sh   # also the same count for an older build
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N1="${N1:-300}"
N2="${N2:-1300}"

bench_init
ensure_tools nginx valgrind python3
PROXY_BIN="$(build_release)"
TOKEN="bench-token-0123456789abcdef"
echo -n "$TOKEN" >"$BENCH_DIR/token.txt"
python3 -c 'import json; print(json.dumps({"items": [{"id": i, "name": "item-%04d" % i, "tags": ["a", "b"]} for i in range(100)]})[:4096], end="")' >"$BENCH_DIR/body-4k.json"
python3 -c 'import gzip, sys; sys.stdout.buffer.write(gzip.compress(open(sys.argv[1], "rb").read()))' "$BENCH_DIR/body-4k.json" >"$BENCH_DIR/body-4k.json.gz"

UP_PORT="$(free_port)"
# nginx's workers (another user) read the body file: open the directory to them.
chmod 755 "$BENCH_DIR"
chmod 644 "$BENCH_DIR/body-4k.json" "$BENCH_DIR/body-4k.json.gz"
NGINX_HTTP_EXTRA="gzip on; gzip_types application/json; gzip_min_length 0;" \
start_nginx "$UP_PORT" "default_type application/json; return 200 'ok';
    location = /small { return 200 '{\"status\":\"ok\"}'; }
    location = /large { alias $BENCH_DIR/body-4k.json; }
    location = /large-gzip { alias $BENCH_DIR/body-4k.json.gz; add_header Content-Encoding gzip; }"

# instructions MASK N PATH [BINARY]: total instructions of a proxy run serving N requests for
# PATH (KEEPALIVE_HEADERS adds request fields); MASK "omit" leaves the key out (a binary from
# before the switch existed). The profile is kept as cg-MASK-N-LABEL.out.
instructions() {
    local mask="$1" n="$2" path="$3" binary="${4:-$PROXY_BIN}" port setting=""
    port="$(free_port)"
    [[ "$mask" == omit ]] || setting="\"maskEchoedCredentials\": $mask,"
    cat >"$BENCH_DIR/proxy.json" <<JSON
{"listen": ["127.0.0.1:$port"], "workers": 1, $setting
 "provider": {"grant": "static", "accessToken": {"file": "$BENCH_DIR/token.txt"}},
 "routes": [{"name": "up", "path": "/", "upstream": "http://127.0.0.1:$UP_PORT/", "credential": "access_token"}]}
JSON
    callgrind_proxy "$BENCH_DIR/cg.out" "$port" "$binary"
    keepalive_gets "$port" "$path" "$n"
    kill -TERM "$CALLGRIND_PID"
    wait "$CALLGRIND_PID" || true
    cp "$BENCH_DIR/cg.out" "$BENCH_DIR/cg-$mask-$n-$LABEL.out"
    grep -o 'Collected : [0-9]*' "$BENCH_DIR/cg.out.log" | awk '{print $3}'
}

# masker_instructions FILE N: instructions spent in the masker itself per request (self cost of
# every EchoMasker function and of finishMasking; the memchr and memcmp it calls are not
# counted apart from other callers' and so are left out). Unlike the totals, this does not move
# with timers that fire more often in a slower run.
masker_instructions() {
    callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null \
        | awk -v n="$2" '$0 ~ /:\$s5Proxy10EchoMaskerV|finishMasking/ { gsub(",", "", $1); sum += $1 }
                         END { printf "%d", sum / n }'
}

# label path Accept-Encoding
cases=("small /small -" "large /large -" "large-asked-gzip /large gzip" "large-always-gzip /large-gzip -")
for case in "${cases[@]}"; do
    read -r LABEL path accept <<<"$case"
    if [[ "$accept" == - ]]; then unset KEEPALIVE_HEADERS; else export KEEPALIVE_HEADERS="{\"Accept-Encoding\": \"$accept\"}"; fi
    declare -A total=()
    for mask in false true; do
        a="$(instructions "$mask" "$N1" "$path")"
        b="$(instructions "$mask" "$N2" "$path")"
        total[$mask]=$(( (b - a) / (N2 - N1) ))
    done
    if [[ -n "${BASE_BIN:-}" ]]; then
        a="$(instructions omit "$N1" "$path" "$BASE_BIN")"
        b="$(instructions omit "$N2" "$path" "$BASE_BIN")"
        echo "$LABEL: $(( (b - a) / (N2 - N1) )) instructions/request for $BASE_BIN"
    fi
    off=${total[false]} on=${total[true]}
    masker="$(masker_instructions "$BENCH_DIR/cg-true-$N2-$LABEL.out" "$N2")"
    # VERBOSE=1: the masker's functions; VERBOSE='regex': the functions matching it.
    [[ -z "${VERBOSE:-}" ]] || callgrind_annotate --auto=no --threshold=100 "$BENCH_DIR/cg-true-$N2-$LABEL.out" \
        | grep -E "$([[ "$VERBOSE" == 1 ]] && echo ':\$s5Proxy10EchoMaskerV|finishMasking|memchr|memcmp' || echo "$VERBOSE")" >&2
    python3 -c "import sys; off, on, m = map(int, sys.argv[1:4]); print(f'$LABEL: {off} instructions/request off, {on} on ({(on - off) / off * 100:+.2f} %, timer noise included); in the masker itself: {m} ({m / on * 100:.2f} % of the request)')" "$off" "$on" "$masker"
    unset total
done
