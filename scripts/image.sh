#!/usr/bin/env bash
# `make image`: builds Docker/Dockerfile into localhost/platform-proxy:latest.
#
#   1. the engine: docker when its daemon answers, else podman (on Debian installed, with what it
#      needs here, when missing); scripts/container-engine.sh decides
#   2. the base images the Dockerfile names (FROM): used when present, else pulled, else, when no
#      registry answers, made here from Debian's packages with debootstrap:
#        debian:bookworm-slim   a minbase Debian 12 root without docs, man pages and locales
#        swift:6.3-bookworm     a Debian 12 root with the Swift image's build packages and this
#                               machine's own Swift toolchain (the one `swift` on PATH runs, or
#                               $SWIFT_TOOLCHAIN, /opt/swift, /usr/share/swift)
#   3. the image, with the engine's layer cache: a second run rebuilds only what changed
#
# Debian's packages are cached in ${XDG_CACHE_HOME:-~/.cache}/platform-proxy/debootstrap; the roots
# themselves are deleted once imported (the imported images are the cache). DEBIAN_MIRROR names
# another Debian mirror. Building the image needs root (or sudo) only to install podman and to
# run debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
# debootstrap, runc and chroot live in the sbin folders, which a user's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin

IMAGE=${IMAGE:-localhost/platform-proxy:latest}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
WORK=$PWD/.build-container
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/platform-proxy/debootstrap
# Of what the official swift:<version>-bookworm image installs next to the toolchain, what a
# `swift build` needs: the libraries the toolchain's programs link (libcurl, libxml2, ncurses,
# SQLite), the C toolchain clang drives (binutils, gcc's start files, libc and libstdc++ headers),
# pkg-config. Not git, the Python and ICU headers and the other -dev packages the official image
# adds for packages with dependencies or C++ code: this package has neither.
SWIFT_IMAGE_PACKAGES=binutils,gcc,libc6-dev,libstdc++-12-dev,libcurl4-openssl-dev,libsqlite3-dev,libxml2,libncurses6,pkg-config,ca-certificates,tzdata

step() { echo "==> image: $* (at $((SECONDS - started)) s)"; }
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
started=$SECONDS
mkdir -p "$WORK"

step "1/3 container engine"
engine_settings=$(scripts/container-engine.sh --install) || exit $?
eval "$engine_settings"
[ -n "${CONTAINERS_CONF:-}" ] && export CONTAINERS_CONF
echo "    $ENGINE${CONTAINERS_CONF:+ (CONTAINERS_CONF=$CONTAINERS_CONF)}"

# The registry's name of an image the Dockerfile names by a short name (docker.io/library/...).
qualified() {
  case "$1" in
    */*/*|*.*/*|localhost/*) echo "$1" ;;
    */*) echo "docker.io/$1" ;;
    *) echo "docker.io/library/$1" ;;
  esac
}

# A Debian 12 minbase root in $1 with the packages $2 (comma-separated), sources as in Debian's images.
debootstrap_root() {
  local root=$1 include=$2
  command -v debootstrap >/dev/null 2>&1 || {
    echo "    installing debootstrap"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  $SUDO rm -rf "$root"
  mkdir -p "$root" "$CACHE"
  echo "    debootstrap $SUITE from $MIRROR into $root"
  $SUDO debootstrap --variant=minbase --cache-dir="$CACHE" ${include:+--include="$include"} \
    "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 || {
      tail -20 "$root.log" >&2
      echo "image: debootstrap failed (log: $root.log)" >&2
      exit 1
    }
  # As in Debian's own images: the release, its updates and its security archive.
  $SUDO rm -f "$root/etc/apt/sources.list"
  $SUDO tee "$root/etc/apt/sources.list.d/debian.sources" >/dev/null <<EOF
Types: deb
URIs: ${MIRROR}
Suites: ${SUITE} ${SUITE}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: ${SUITE}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO chroot "$root" apt-get clean
  $SUDO rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log \
    "$root"/var/log/apt/* "$root"/var/cache/ldconfig/aux-cache "$root"/etc/machine-id
}

# What Debian's -slim images leave out: documentation, man pages, locales (dpkg excludes them from
# later installs too), and apt keeps no package caches.
slim_root() {
  local root=$1
  $SUDO tee "$root/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  $SUDO tee "$root/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' | $SUDO tee "$root/etc/apt/apt.conf.d/docker-no-languages" >/dev/null
  $SUDO find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  $SUDO find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  $SUDO rm -rf "$root"/usr/share/{groff,info,linda,lintian,man}/*
  $SUDO find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
}

# The root of the Swift toolchain (its usr/ holds bin/, lib/, include/, share/): $SWIFT_TOOLCHAIN,
# else the one `swift` on PATH runs, else /opt/swift or /usr/share/swift.
toolchain_root() {
  local swift dir
  if [ -n "${SWIFT_TOOLCHAIN:-}" ]; then
    echo "$SWIFT_TOOLCHAIN"
  elif swift=$(command -v swift); then
    dirname "$(dirname "$(dirname "$(readlink -f "$swift")")")"
  else
    for dir in /opt/swift /usr/share/swift; do
      [ -x "$dir/usr/bin/swift" ] && { echo "$dir"; return; }
    done
    echo "image: no Swift toolchain for the build image: put swift on PATH or set SWIFT_TOOLCHAIN" >&2
    exit 1
  fi
}

import_root() {
  local root=$1 name=$2
  echo "    importing $root as $name ($($SUDO du -sh "$root" | cut -f1))"
  $SUDO tar -C "$root" --numeric-owner -c . | $ENGINE import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$name" >/dev/null
  $SUDO rm -rf "$root" "$root.log"
}

make_base() {
  local name=$1 root
  root=$WORK/roots/$(printf %s "$name" | tr -c 'a-zA-Z0-9.-' '_')
  case "$name" in
    debian:$SUITE-slim)
      debootstrap_root "$root" ""
      slim_root "$root"
      ;;
    swift:*-$SUITE)
      local version=${name#swift:} toolchain have
      version=${version%-$SUITE}
      toolchain=$(toolchain_root)
      have=$("$toolchain/usr/bin/swift" --version 2>&1 | grep -o 'Swift version [0-9.]*' | head -1)
      case "$have " in
        "Swift version $version"[.\ ]*) ;;
        *) echo "image: $name needs Swift $version; the toolchain at $toolchain is $have" >&2; exit 1 ;;
      esac
      debootstrap_root "$root" "$SWIFT_IMAGE_PACKAGES"
      echo "    linking the toolchain $toolchain ($have) into /usr"
      # Hard links where the toolchain is on the same file system (the root is deleted after the
      # import, which reads the files once), else a copy.
      $SUDO cp -al "$toolchain/usr/." "$root/usr/" 2>/dev/null \
        || $SUDO cp -R --preserve=mode,timestamps,links "$toolchain/usr/." "$root/usr/"
      ;;
    *)
      echo "image: cannot pull $name and cannot make it here" >&2
      exit 1
      ;;
  esac
  import_root "$root" "$(qualified "$name")"
}

step "2/3 base images"
for name in $(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p' Docker/Dockerfile); do
  if $ENGINE image inspect "$name" >/dev/null 2>&1 || $ENGINE image inspect "$(qualified "$name")" >/dev/null 2>&1; then
    echo "    $name: present"
  elif $ENGINE pull -q "$(qualified "$name")" >/dev/null 2>"$WORK/pull.log"; then
    echo "    $name: pulled"
  else
    echo "    $name: no registry answers ($(tail -1 "$WORK/pull.log" | cut -c1-160)); making it here"
    t=$SECONDS
    make_base "$name"
    echo "    $name: made in $((SECONDS - t)) s"
  fi
done

step "3/3 $IMAGE from Docker/Dockerfile"
build=("$ENGINE" build --network=host -f Docker/Dockerfile -t "$IMAGE")
# HEALTHCHECK exists only in the Docker image format; podman writes OCI images unless told.
[ "$ENGINE" = podman ] && build+=(--format docker)
"${build[@]}" .
size=$($ENGINE image inspect --format '{{.Size}}' "$IMAGE")
# The binary as built in the image, for test_docker.py's check of its libraries against the
# runtime stage's packages (PLATFORM_PROXY_STATIC_BIN in the Makefile's integration target).
copy=platform-proxy-image-copy-$$
$ENGINE create --no-healthcheck --name "$copy" "$IMAGE" >/dev/null
$ENGINE cp "$copy:/usr/local/bin/platform-proxy" "$WORK/platform-proxy" || { $ENGINE rm -v "$copy" >/dev/null; exit 1; }
$ENGINE rm -v "$copy" >/dev/null
echo "==> image: $IMAGE built in $((SECONDS - started)) s, $((size / 1024 / 1024)) MiB"
