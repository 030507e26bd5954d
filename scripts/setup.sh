#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian 12 machine with the Swift toolchain:
# the C libraries (libcurl, SQLite), the real test peers (nginx, wrk, slowhttptest, openssl for a
# test CA) and pytest.
# Idempotent and quiet when everything is already there.
set -euo pipefail

packages=(pkg-config libcurl4-openssl-dev libsqlite3-dev nginx-light wrk slowhttptest haproxy curl ca-certificates openssl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The nginx package starts a system nginx on port 80; the tests start their own.
  { command -v systemctl >/dev/null && $SUDO systemctl disable --now nginx haproxy; } >/dev/null 2>&1 || true
  $SUDO pkill -x nginx >/dev/null 2>&1 || true
  $SUDO pkill -x haproxy >/dev/null 2>&1 || true
fi

# Test peers from PyPI (pytest, Authlib, linters); pip returns at once when they are installed.
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$(dirname "$0")/../Tests/Integration/requirements.txt"

