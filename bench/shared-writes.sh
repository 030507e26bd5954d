#!/usr/bin/env bash
# Which objects both event loops write per forwarded request. A retain or release is an atomic
# write to the object's reference count; when two loops on two cores write the same object, its
# cache line moves between the cores on every request, which costs far more than the instruction
# (docs/performance.md, "Nothing shared is written"). Instruction counts (cost-profile.sh)
# cannot see it; this census can.
#
# The release proxy (two loops, the bench's credentialed route, access log off) forwards keep-alive
# GETs from several connections, so both loops serve; gdb logs every swift_retain and
# swift_release with the calling functions. Printed: the loops' retains and releases per request,
# those on objects both loops touched, and those objects with their most frequent callers.
#
#   bench/shared-writes.sh
#   PLATFORM_PROXY_RELEASE_BIN=/path/to/platform-proxy REQUESTS=16 bench/shared-writes.sh
#
# Slow by design (gdb stops at every call): keep REQUESTS small. Objects only read are not writes:
# the empty array's storage is immortal, so its retains change nothing and are left out.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS="${REQUESTS:-8}"
CONNECTIONS=8

bench_init
ensure_tools nginx gdb python3
PROXY_BIN="$(build_release)"
start_bench_upstream http
port="$(free_port)"
PROXY_WORKERS=2 start_proxy "$PROXY_BIN" "$port" "$(PROXY_WORKERS=2 bench_proxy_config "$port" "$UPSTREAM_URL")"

# requests PORT N: N keep-alive GETs spread over CONNECTIONS connections.
requests() {
    python3 - "$1" "$2" "$CONNECTIONS" <<'PY'
import http.client, sys
port, n, k = (int(a) for a in sys.argv[1:])
conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _ in range(k)]
for i in range(n):
    c = conns[i % k]
    c.request("GET", "/")
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
PY
}

requests "$port" 200  # warm: both loops have their slots, pools and connections

cat >"$BENCH_DIR/census.gdb" <<'GDB'
set pagination off
set confirm off
set print thread-events off
printf "EMPTY %lx\n", &_swiftEmptyArrayStorage
printf "RETAIN %lx\n", &swift_retain
break swift_retain
commands
silent
printf "R %d %lx %lx\n", $_thread, $rdi, ($rdi > 0x10000 && $rdi < 0x800000000000) ? *(long *)$rdi : 0
bt 3
continue
end
break swift_release
commands
silent
printf "D %d %lx %lx\n", $_thread, $rdi, ($rdi > 0x10000 && $rdi < 0x800000000000) ? *(long *)$rdi : 0
bt 3
continue
end
continue
GDB
gdb -p "$PROXY_PID" -batch -x "$BENCH_DIR/census.gdb" >"$BENCH_DIR/census.log" 2>&1 &
gdb_pid=$!
BENCH_PIDS+=("$gdb_pid")
for _ in $(seq 120); do grep -q "^Breakpoint 2 at" "$BENCH_DIR/census.log" 2>/dev/null && break; sleep 0.5; done
sleep 1
requests "$port" "$REQUESTS"
sleep 1
# gdb detaches on SIGINT; one that is inside a breakpoint's commands may miss it, so it gets
# TERM and then KILL (the proxy, left with breakpoints in its code, is stopped at cleanup).
for signal in INT INT TERM KILL; do
    kill -"$signal" "$gdb_pid" 2>/dev/null || break
    for _ in $(seq 20); do kill -0 "$gdb_pid" 2>/dev/null || break 2; sleep 0.25; done
done
wait "$gdb_pid" 2>/dev/null || true

nm --defined-only "$PROXY_BIN" >"$BENCH_DIR/symbols.txt"
python3 - "$BENCH_DIR/census.log" "$REQUESTS" "$BENCH_DIR/symbols.txt" <<'PY' | swift demangle --simplified
import bisect, collections, re, sys
log, requests, symbols = sys.argv[1], int(sys.argv[2]), sys.argv[3]
events, current, empty, retain, isa = [], None, None, None, {}
for line in open(log, errors="replace"):
    if line.startswith("EMPTY ") or line.startswith("RETAIN "):
        name, value = line.split()
        if name == "EMPTY": empty = int(value, 16)
        else: retain = int(value, 16)
        continue
    m = re.match(r"^(R|D) (\d+) ([0-9a-f]+) ([0-9a-f]+)$", line.strip())
    if m:
        current = [m.group(2), int(m.group(3), 16), []]
        isa[current[1]] = int(m.group(4), 16)
        events.append(current)
        continue
    m = re.match(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", line)
    if m and current is not None:
        current[2].append(m.group(1))
threads = collections.Counter(t for t, _, _ in events)
# The two loops are the two busiest threads (the main thread waits for signals).
loops = [t for t, _ in threads.most_common() if t != "1"][:2]
ops, callers = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
for thread, address, stack in events:
    if thread not in loops or not 0x10000 <= address < 0x800000000000:
        continue
    ops[address][thread] += 1
    callers[address][" < ".join(stack[1:3])] += 1
# The empty array's storage is immortal: retaining it reads its count and writes nothing.
shared = [a for a in ops if all(ops[a][t] for t in loops) and a != empty]
# An object's type: the symbol its first word (the metadata pointer) falls in, given the load
# address of swift_retain (gdb's) against its address in the file (nm's).
table = sorted((int(p[0], 16), p[2]) for p in (l.split() for l in open(symbols)) if len(p) == 3)
addresses = [a for a, _ in table]
base = retain - dict((n, a) for a, n in table)["swift_retain"]
def kind(address):
    i = bisect.bisect_right(addresses, isa.get(address, 0) - base) - 1
    return table[i][1] if i >= 0 else "?"
total = sum(sum(ops[a].values()) for a in ops)
on_shared = sum(sum(ops[a].values()) for a in shared)
print(f"loops' retains and releases per request: {total / requests:.0f}; on objects both loops write: {on_shared / requests:.1f}")
for a in sorted(shared, key=lambda a: -sum(ops[a].values())):
    print(f"  {sum(ops[a].values()) / requests:5.1f}  {kind(a)} at {a:#x}")
    for caller, n in callers[a].most_common(2):
        print(f"          {n / requests:4.1f}  {caller[:160]}")
PY
