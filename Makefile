# netdoctor: `make demo` sets up and shows the tool, `make test` sets up
# and runs every test (root tests need root; they skip otherwise).
export PATH := /usr/local/go/bin:$(PATH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOFLAGS_BUILD = -trimpath -ldflags "-s -w -X github.com/netdoctor/netdoctor/internal/cli.Version=$(VERSION)"

.PHONY: all build deps test lint demo bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -o bin/netdoctor ./cmd/netdoctor

lint:
	@unformatted=$$(gofmt -l cmd internal bench); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	GOOS=darwin go vet ./...

test: deps lint build
	go test -count=1 ./...

demo: build
	scripts/demo.sh bin/netdoctor

bench: build
	bench/snapshot.sh

clean:
	rm -rf bin
