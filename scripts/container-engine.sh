#!/usr/bin/env bash
# Picks the container engine that `make image` and Tests/Integration/test_container.py use, and
# prints it as shell assignments:
#
#   scripts/container-engine.sh            ENGINE=docker|podman (and CONTAINERS_CONF for podman)
#   scripts/container-engine.sh --install  the same; on Debian, when no docker daemon answers,
#                                          installs what podman needs here first (idempotent)
#
# The choice: $CONTAINER_ENGINE when set; else docker when its daemon answers (a docker client
# without a daemon does not count); else podman. Exit status 3 when none can run.
#
# Podman runs with runc (crun refuses hosts with hybrid cgroup v1/v2 hierarchies) and with file
# and process limits no higher than this shell's hard limits (podman's defaults exceed them on
# hosts that cap them, and the container then fails to start). Both go into a containers.conf
# under .build-container/ named by CONTAINERS_CONF, which every podman command reads (`podman
# kube play` included); a CONTAINERS_CONF already set is the machine's own and is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

install=false
[ "${1:-}" = --install ] && install=true

docker_answers() {
  command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1
}

# What podman needs on Debian: runc (see above), catatonit (the pause process of pods, `podman
# kube play`) and, on Debian 12's CNI network backend, the dnsname plugin, so compose services
# find each other by name.
debian_podman_packages() {
  local p missing=() available=()
  for p in podman runc catatonit golang-github-containernetworking-plugin-dnsname; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  # The dnsname plugin exists only for Debian releases whose podman uses CNI.
  for p in "${missing[@]}"; do
    { [ "$p" = podman ] || apt-cache show "$p" >/dev/null 2>&1; } && available+=("$p")
  done
  echo "container-engine: installing ${available[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${available[@]}" >/dev/null
}

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if docker_answers; then
    engine=docker
  elif $install && command -v apt-get >/dev/null 2>&1; then
    debian_podman_packages
    engine=podman
  elif command -v podman >/dev/null 2>&1; then
    engine=podman
  else
    echo "container-engine: no container engine can run here (no docker daemon answers, no podman)." >&2
    echo "  Install docker or podman; on Debian, scripts/container-engine.sh --install installs podman." >&2
    exit 3
  fi
fi
case "$engine" in
  docker|podman) ;;
  *) echo "container-engine: CONTAINER_ENGINE=$engine: expected docker or podman" >&2; exit 2 ;;
esac
echo "ENGINE=$engine"
[ "$engine" = podman ] || exit 0

if [ -n "${CONTAINERS_CONF:-}" ]; then
  echo "CONTAINERS_CONF=$CONTAINERS_CONF"
  exit 0
fi
limits=()
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] || limits+=("\"nofile=$nofile:$nofile\"")
# Threads count as processes, per uid, across the host: the proxy needs a few dozen. Hosts refuse
# higher values than their hard limit, and some (this project's CI) refuse values near it too.
nproc=$(ulimit -Hu)
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ]; } && nproc=4096
limits+=("\"nproc=$nproc:$nproc\"")
conf=$PWD/.build-container/containers.conf
mkdir -p "$(dirname "$conf")"
{
  echo "# Written by scripts/container-engine.sh for this host: read by podman through CONTAINERS_CONF."
  echo "[containers]"
  echo "default_ulimits = [$(IFS=,; echo "${limits[*]}")]"
  if command -v runc >/dev/null 2>&1; then
    echo "[engine]"
    echo "runtime = \"runc\""
  fi
} > "$conf.tmp"
mv "$conf.tmp" "$conf"
echo "CONTAINERS_CONF=$conf"
