#!/usr/bin/env bash
# make dist: one archive per client platform, OUT/farwing-VERSION-OS-ARCH.tar.gz, holding the
# release build (it carries every supported remote platform's peer: scripts/peers.sh), README.md,
# LICENSE (Farwing's terms, then the notices of Go and of every module compiled in) and SHA256SUMS
# over those three; and OUT/SHA256SUMS over the archives. Reproducible: the builds have no path,
# build ID or time of this machine in them, nor a VCS stamp (whether go stamps one depends on its
# environment's GOFLAGS; VERSION names the commit), and the archives fix names' order, owners, modes and
# times (the commit's), so that two runs on one commit give the same bytes (--check builds twice,
# the second without the build cache, and compares).
#
#   scripts/dist.sh OUT [--check]     (VERSION, GO and SOURCE_DATE_EPOCH from the environment)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=${1:?usage: scripts/dist.sh OUT [--check]}
check=${2:-}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
clients=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64)

if [ "$check" = --check ]; then
  again=$(mktemp -d)
  trap 'rm -rf "$again"' EXIT
  VERSION=$version SOURCE_DATE_EPOCH=$epoch "$0" "$out"
  VERSION=$version SOURCE_DATE_EPOCH=$epoch GOFLAGS="$("$GO" env GOFLAGS) -a" "$0" "$again/dist"
  if ! diff <(cd "$out" && sha256sum ./*) <(cd "$again/dist" && sha256sum ./*); then
    echo "dist: NOT reproducible: a second build (without the build cache) differs" >&2
    exit 1
  fi
  echo "dist: reproducible: a second build, without the build cache, gave the same bytes" >&2
  exit 0
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GO=$GO VERSION=$version ./scripts/peers.sh "$work/peers"

# LICENSE: Farwing's own terms, then the licence of Go (its standard library is in the binary) and
# of each module the client is built from.
{
  cat LICENSE
  printf '\n\n================================================================\n'
  printf 'Farwing is built from the following software, under its own terms.\n'
  printf '================================================================\n'
  printf '\n---- Go (the standard library and runtime), %s ----\n\n' "$("$GO" env GOVERSION)"
  cat "$("$GO" env GOROOT)/LICENSE"
  for os in linux darwin freebsd; do
    GOOS=$os CGO_ENABLED=0 "$GO" list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/farwing
  done | sort -u | while read -r mod dir; do
    lic=$(ls "$dir"/LICENSE* "$dir"/LICENCE* "$dir"/COPYING* 2>/dev/null | head -1 || true)
    [ -n "$lic" ] || { echo "dist: $mod has no licence file" >&2; exit 1; }
    printf '\n---- %s ----\n\n' "$mod"
    cat "$lic"
  done
} >"$work/LICENSE"

for p in "${clients[@]}"; do
  os=${p%/*} arch=${p#*/}
  name=farwing-$version-$os-$arch
  d=$work/stage/$name
  mkdir -p "$d"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -buildvcs=false -tags farwing_peers -overlay "$work/peers/overlay.json" \
    -ldflags "-s -w -buildid= -X main.version=$version" -o "$d/farwing" ./cmd/farwing
  cp README.md "$d/README.md"
  cp "$work/LICENSE" "$d/LICENSE"
  (cd "$d" && sha256sum farwing README.md LICENSE >SHA256SUMS)
  chmod 755 "$d" "$d/farwing"
  chmod 644 "$d/README.md" "$d/LICENSE" "$d/SHA256SUMS"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=ustar \
    -C "$work/stage" -cf - "$name" | gzip -9 -n >"$out/$name.tar.gz"
  echo "dist: $name.tar.gz $(wc -c <"$out/$name.tar.gz" | tr -d ' ') bytes (farwing $(wc -c <"$d/farwing" | tr -d ' ') bytes)" >&2
done
(cd "$out" && sha256sum farwing-"$version"-*.tar.gz >SHA256SUMS)
