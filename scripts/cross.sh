#!/usr/bin/env bash
# Vets every package (tests included) and builds the client for each platform the client runs
# on, and vets the peer build (-tags farwing_peer), without cgo, as a release would: a file that uses one system's calls or types without a
# build constraint fails here, on this machine, rather than on a user's.
#
#   scripts/cross.sh [OS/ARCH...]     (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64)
#
# One line per platform; the first failure stops it, with the tool's own output above its line.
# With -trimpath, as scripts/peers.sh builds: the packages compiled here serve its builds too.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64)
for p in "${platforms[@]}"; do
	os=${p%/*} arch=${p#*/}
	if [ -z "$os" ] || [ -z "$arch" ] || [ "$os" = "$p" ]; then
		echo "cross: $p: want OS/ARCH, such as darwin/arm64" >&2
		exit 2
	fi
	if ! CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" vet -trimpath ./...; then
		echo "cross: $p: FAILED: go vet ./... (its output is above)" >&2
		exit 1
	fi
	if ! CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -o /dev/null ./cmd/farwing; then
		echo "cross: $p: FAILED: go build ./cmd/farwing (its output is above)" >&2
		exit 1
	fi
	# The peer build a release carries (scripts/peers.sh): the client's commands left out.
	if ! CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" vet -trimpath -tags farwing_peer ./cmd/farwing; then
		echo "cross: $p: FAILED: go vet -tags farwing_peer ./cmd/farwing (its output is above)" >&2
		exit 1
	fi
	echo "cross: $p: vet and build ok (client and peer build)"
done
