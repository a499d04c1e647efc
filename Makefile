# Farwing — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/farwing

.PHONY: all build test demo bench-lab clean

all: build

# A static binary: it is what bootstrap uploads to remote hosts.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN) ./cmd/farwing

# The test command (CI runs exactly this through .ci/run). Lab tests need root and skip without it.
test:
	./scripts/setup.sh
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...
	GO=$(GO) ./scripts/fuzz.sh

# A real copy through the built-in lab: 100 Mbit/s, 60 ms RTT, 1 % loss each way, real sshd.
demo: build
	./scripts/setup.sh
	./scripts/demo.sh

clean:
	rm -rf bin
