#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine with the Swift toolchain.
#
#   scripts/setup.sh build   the C libraries the build links (libcurl, OpenSSL libcrypto, SQLite) — what `make run` needs
#   scripts/setup.sh test    the above, the real test peers (nginx, HAProxy, wrk, slowhttptest, openssl
#                            for a test CA), strace (a test counts system calls), Chromium and its
#                            driver (the console's browser tests) and a project
#                            virtual environment .venv/ with pytest, Flask, Authlib and selenium — what
#                            `make test` needs
#   scripts/setup.sh bench   the above, and what the benchmark scripts measure with (valgrind,
#                            perf, gdb, a C compiler for bench/curl-floor.c)
#
# Idempotent and quiet when everything is already there. It never stops, disables or kills any
# process: services that Debian would start while installing a package (nginx, HAProxy) are kept
# from starting with a temporary /usr/sbin/policy-rc.d, the Debian way; the tests start their own
# peers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}
build_packages=(pkg-config libcurl4-openssl-dev libssl-dev libsqlite3-dev)
test_packages=(nginx-light haproxy wrk slowhttptest curl ca-certificates openssl python3 python3-venv strace
               chromium chromium-driver)
bench_packages=(valgrind linux-perf gcc libc6-dev gdb)
case "$mode" in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  bench) packages=("${build_packages[@]}" "${test_packages[@]}" "${bench_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh build|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  # policy-rc.d exiting 101 tells invoke-rc.d not to start the services these packages bring.
  # An existing policy (the machine's own) is left as it is and respected.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# platform-proxy setup: no service starts during this install\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$mode" != build ] || exit 0

# Test tools from PyPI go into the project's own virtual environment, never into the system
# Python (PEP 668). Re-installed only when requirements.txt changes.
requirements=Tests/Integration/requirements.txt
stamp=.venv/.requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: Python test tools into .venv/"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements"
  echo "$want" > "$stamp"
fi
