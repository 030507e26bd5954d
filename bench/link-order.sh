#!/usr/bin/env bash
# Regenerates Sources/platform-proxy/link-order.txt: the functions of the release binary that run
# when the proxy starts, answers its health probe and forwards requests, hottest first. The
# release link (Package.swift) places them together at the front of the text with lld's
# --symbol-ordering-file, so the pages the process maps at rest hold code it runs instead of
# neighbours of it (docs/architecture.md, "The release binary").
#
# The list only orders code: a function missing from it (new, renamed) links after the listed
# ones and works the same, so a stale list costs memory, never correctness. Regenerate it after a
# change that renames much of the request path:
#
#   bench/link-order.sh                        # builds, profiles (callgrind), rewrites the list
#   PLATFORM_PROXY_RELEASE_BIN=path bench/link-order.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS="${REQUESTS:-200}"
OUT="$BENCH_REPO_ROOT/Sources/platform-proxy/link-order.txt"

bench_init
ensure_tools nginx valgrind python3
PROXY_BIN="$(build_release)"
start_bench_upstream http

port="$(free_port)"
bench_proxy_config "$port" "$UPSTREAM_URL" >"$BENCH_DIR/proxy.json"
# --demangle=no: the list must hold the names the linker sees.
callgrind_proxy "$BENCH_DIR/cg.out" "$port" "$PROXY_BIN" --demangle=no
keepalive_gets "$port" /_platform/health 1 /_platform/ready 1 /_platform/metrics 1 /small "$REQUESTS"
kill -TERM "$CALLGRIND_PID"
wait "$CALLGRIND_PID" || true

# Self cost per function of our binary (its own code and the statically linked Swift runtime),
# hottest first; callgrind names with an address only (no symbol) are left out.
callgrind_annotate --auto=no --threshold=100 "$BENCH_DIR/cg.out" | python3 -c '
import os, re, sys
binary = os.path.realpath(sys.argv[1])
rows = []
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(?:[^:\s]*:)?(\S+)\s+\[(.+)\]\s*$", line)
    if m and os.path.realpath(m.group(3)) == binary and not m.group(2).startswith("0x"):
        rows.append((int(m.group(1).replace(",", "")), m.group(2)))
seen = set()
for _, name in sorted(rows, key=lambda r: -r[0]):
    name = re.sub(r"\x27\d+$", "", name)  # callgrind marks recursion levels as name'\''2, '\''3, ...
    if name not in seen:
        seen.add(name)
        print(name)
' "$PROXY_BIN" >"$BENCH_DIR/order.txt"
count=$(wc -l <"$BENCH_DIR/order.txt")
((count > 200)) || bench_die "only $count functions found in the profile; is $PROXY_BIN built with symbols?"
mv "$BENCH_DIR/order.txt" "$OUT"
# SwiftPM does not track the list as a link input, and a touched source that compiles to the same
# object does not relink either: remove the release binaries this checkout built, so the next
# release build links again.
find "$BENCH_REPO_ROOT/.build" -path '*/release/platform-proxy' -type f -delete 2>/dev/null || true
bench_log "wrote $count functions to ${OUT#"$BENCH_REPO_ROOT"/}; the next release build relinks"
