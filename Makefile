# Farwing — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/farwing
PEERS   := bin/peers
# Static, with no paths of this machine and no build ID: one commit and VERSION give the same bytes.
LDFLAGS := -s -w -buildid= -X main.version=$(VERSION)

.PHONY: all build plain test cross demo dist clean

all: build

# The release build: bin/farwing carries the peer of every supported remote platform
# (scripts/peers.sh), so that first contact installs one on Linux and macOS of either CPU.
build:
	GO=$(GO) VERSION=$(VERSION) ./scripts/peers.sh $(PEERS)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags farwing_peers -overlay $(PEERS)/overlay.json -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/farwing

# A plain build (as go install makes): it reaches hosts of its own platform only.
plain:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/farwing

# The test command (CI runs exactly this through .ci/run). Lab tests need root and skip without.
# scripts/cross.sh vets every package for every supported platform, this one included; the tests
# then build as the release does (no cgo, -trimpath), so that they reuse what it compiled.
test:
	./scripts/setup.sh
	./scripts/lint-sh.sh
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	GO=$(GO) ./scripts/cross.sh
	CGO_ENABLED=0 $(GO) test -trimpath -count=1 -timeout 20m ./...
	GO=$(GO) ./scripts/fuzz.sh

# Every supported platform builds and vets (scripts/cross.sh).
cross:
	GO=$(GO) ./scripts/cross.sh

# One archive per client platform in dist/ (scripts/dist.sh), reproducible.
dist:
	GO=$(GO) VERSION=$(VERSION) ./scripts/dist.sh dist

# A real copy through the built-in lab: 100 Mbit/s, 60 ms RTT, 1 % loss each way, real sshd.
demo: build
	./scripts/setup.sh
	./scripts/demo.sh

clean:
	rm -rf bin dist
