#!/usr/bin/env bash
# Builds the peers a release build carries (internal/peers): for each platform, farwing as a plain
# build (no peers of its own), static, with -trimpath, no build ID and no VCS stamp so that one commit gives the
# same bytes, compressed with gzip -9 -n; then OUT/MANIFEST ("OS/ARCH SHA256 SIZE FILE" per peer)
# and OUT/overlay.json, which places them where internal/peers embeds them:
#
#   scripts/peers.sh OUT [OS/ARCH...]     (default: every supported platform)
#   go build -tags farwing_peers -overlay OUT/overlay.json ./cmd/farwing
#
# VERSION (the environment) is what `farwing version` says; the client and its peers get the same.
set -euo pipefail
GO=${GO:-go}
out=${1:?usage: scripts/peers.sh OUT [OS/ARCH...]}
shift
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
root=$(cd "$(dirname "$0")/.." && pwd)
version=${VERSION:-dev}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/farwing-* "$out/MANIFEST" "$out/overlay.json"
manifest=
overlay=
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  exe="$out/farwing-$os-$arch"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.version=$version" -o "$exe" ./cmd/farwing)
  sum=$(sha256sum "$exe" | cut -d' ' -f1)
  size=$(wc -c <"$exe" | tr -d ' ')
  gzip -9 -n -c "$exe" >"$exe.gz"
  rm -f "$exe"
  manifest+="$p $sum $size farwing-$os-$arch.gz"$'\n'
  overlay+="${overlay:+,}\"$root/internal/peers/carried/farwing-$os-$arch.gz\": \"$exe.gz\""
  echo "peers: $p $(wc -c <"$exe.gz" | tr -d ' ') bytes gzip, $size bytes, sha256 $sum" >&2
done
printf '%s' "$manifest" >"$out/MANIFEST"
overlay+=",\"$root/internal/peers/carried/MANIFEST\": \"$out/MANIFEST\""
printf '{"Replace": {%s}}\n' "$overlay" >"$out/overlay.json"
