#!/usr/bin/env bash
# Runs one step of `make test` (build, unit, image, integration) with its whole output in a log file,
# and prints what a person needs from it: one line when it passes, the failures when it does not.
#
#   scripts/step.sh NAME COMMAND [ARGS...]
#
# A NAME starting with unit or integration (integration-untuned) is read as swift test or pytest output.
# The log is .build/logs/NAME.log (LOG_DIR names another folder), rewritten on every run. On success:
#
#   unit: 729 tests passed in 9.9 s (log: .build/logs/unit.log)
#
# and below it any compiler warnings the step printed, each once. On failure: the failing tests with
# the tail of their output (scripts/failures.py reads the Swift Testing and pytest logs), or for other
# steps the errors and the log's tail, then the log's path; the exit status is the command's own, so
# make stops there. VERBOSE=1 also streams the whole output to the terminal; CI=true shows longer
# tails on failure, since a CI job's console may be all that is kept of it.
set -uo pipefail
cd "$(dirname "$0")/.."

name=$1
shift
dir=${LOG_DIR:-.build/logs}
mkdir -p "$dir"
log=$dir/$name.log
tail_lines=30
[ "${CI:-}" = true ] && tail_lines=150

echo "$name: $* (log: $log)"
started=$SECONDS
if [ "${VERBOSE:-}" = 1 ]; then
  "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
else
  "$@" >"$log" 2>&1
  status=$?
fi
elapsed=$((SECONDS - started))

# Compiler warnings, each once (a module's warning is printed again for every file of its target).
warnings() {
  grep -E '^[^ ]+:[0-9]+:[0-9]+: warning: ' "$log" | sort -u
}

summary() {
  case "$name" in
    build)
      # Build complete! (76.20s)
      sed -n 's/^Build complete! (\([0-9.]*\)s)$/complete in \1 s/p' "$log" | tail -1
      ;;
    unit*)
      # ✔ Test run with 729 tests in 140 suites passed after 9.934 seconds.
      sed -n 's/^.*Test run with \([0-9]*\) tests\{0,1\} .*passed after \([0-9.]*\) seconds.*$/\1 tests passed in \2 s/p' "$log" | tail -1
      ;;
    integration*)
      # 1011 passed, 1 skipped in 480.12s (0:08:00)   (framed by = signs without -q)
      grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s\b' "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//'
      ;;
    image)
      # ==> image: localhost/platform-proxy:latest built in 2 s, 98 MiB
      sed -n 's/^==> image: \(.* built in .*\)$/\1/p' "$log" | tail -1
      ;;
  esac
}

if [ "$status" -eq 0 ]; then
  line=$(summary)
  line=${line:-done in $elapsed s}
  count=$(warnings | wc -l)
  [ "$count" -eq 0 ] || line="$line, $count compiler warning$([ "$count" -eq 1 ] || echo s)"
  echo "$name: $line (log: $log)"
  warnings | head -20 | sed 's/^/  /'
  exit 0
fi

echo "$name: FAILED with exit status $status after $elapsed s (log: $log)"
case "$name" in
  unit*) python3 scripts/failures.py swift-testing "$log" "$tail_lines" ;;
  integration*) python3 scripts/failures.py pytest "$log" "$tail_lines" ;;
  *)
    errors=$(grep -E '(^|: )(error|fatal error): ' "$log" | sort -u | head -40)
    if [ -n "$errors" ]; then
      echo "$errors" | sed 's/^/  /'
    fi
    echo "--- last $tail_lines lines of $log"
    tail -n "$tail_lines" "$log"
    ;;
esac
echo "$name: FAILED (log: $log)"
exit "$status"
