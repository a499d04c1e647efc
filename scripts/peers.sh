#!/usr/bin/env bash
# Builds the peers a release build carries (internal/peers): for each platform, farwing's peer
# build (the tag farwing_peer: `farwing serve` without what only a client needs), static, with
# -trimpath, no build ID and no VCS stamp so that one commit gives the same bytes, compressed
# with gzip -9 -n and, where xz is installed, with xz too (single-threaded, so that one xz version
# gives the same bytes; with the x86 BCJ filter for amd64, which every xz decodes; none for arm64,
# whose filter only xz 5.4 and later decode); then OUT/MANIFEST ("OS/ARCH SHA256 SIZE FILE" per
# peer and form) and OUT/overlay.json, which places them where internal/peers embeds them:
#
#   scripts/peers.sh OUT [OS/ARCH...]     (default: every supported platform)
#   go build -tags farwing_peers -overlay OUT/overlay.json ./cmd/farwing
#
# VERSION (the environment) is what `farwing version` says; the client and its peers get the same.
# NOXZ=1 carries the gzip forms only.
set -euo pipefail
GO=${GO:-go}
out=${1:?usage: scripts/peers.sh OUT [OS/ARCH...]}
shift
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
root=$(cd "$(dirname "$0")/.." && pwd)
version=${VERSION:-dev}
xz=
if [ "${NOXZ:-0}" != 1 ]; then
  if command -v xz >/dev/null 2>&1; then
    xz=xz
  else
    echo "peers: no xz here: the peers are carried in gzip form only (a remote with xz would take a quarter fewer bytes)" >&2
  fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/farwing-* "$out/MANIFEST" "$out/overlay.json"
manifest=
overlay=
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  exe="$out/farwing-$os-$arch"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -buildvcs=false -tags farwing_peer \
    -ldflags "-s -w -buildid= -X main.version=$version" -o "$exe" ./cmd/farwing)
  sum=$(sha256sum "$exe" | cut -d' ' -f1)
  size=$(wc -c <"$exe" | tr -d ' ')
  gzip -9 -n -c "$exe" >"$exe.gz"
  manifest+="$p $sum $size farwing-$os-$arch.gz"$'\n'
  overlay+="${overlay:+,}\"$root/internal/peers/carried/farwing-$os-$arch.gz\": \"$exe.gz\""
  said="$(wc -c <"$exe.gz" | tr -d ' ') bytes gzip"
  if [ -n "$xz" ]; then
    bcj=
    [ "$arch" = amd64 ] && bcj=--x86
    # A dictionary as large as the build (at most 8 MiB here): the remote's xz -d needs about that much memory.
    "$xz" -T1 $bcj --lzma2=preset=9e,dict=8MiB -c "$exe" >"$exe.xz"
    manifest+="$p $sum $size farwing-$os-$arch.xz"$'\n'
    overlay+=",\"$root/internal/peers/carried/farwing-$os-$arch.xz\": \"$exe.xz\""
    said+=", $(wc -c <"$exe.xz" | tr -d ' ') bytes xz"
  fi
  rm -f "$exe"
  echo "peers: $p $said, $size bytes, sha256 $sum" >&2
done
printf '%s' "$manifest" >"$out/MANIFEST"
overlay+=",\"$root/internal/peers/carried/MANIFEST\": \"$out/MANIFEST\""
printf '{"Replace": {%s}}\n' "$overlay" >"$out/overlay.json"
