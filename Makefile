# agentassistant: `make run` starts the server with its web UI, `make test`
# runs every test. Both work on a fresh clone with Go and Node.js installed.

GO      ?= go
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
GOVULNCHECK   ?= $(GO) run golang.org/x/vuln/cmd/govulncheck@v1.1.4
NPM     ?= npm
BIN     := bin
WEB     := web
BUF     := $(WEB)/node_modules/.bin/buf
RUNARGS ?=
TOOLS   := $(GO) tool -modfile=tools/go.mod

# The version, commit and date -version prints, from git when this is a
# clone (else the binaries say "dev"); release archives stamp their own.
GIT_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DATE    := $(shell git log -1 --format=%cI 2>/dev/null)
BUILDINFO   := github.com/agentassistant/agentassistant/internal/buildinfo
LDFLAGS     := $(if $(GIT_VERSION),-X $(BUILDINFO).version=$(GIT_VERSION) -X $(BUILDINFO).commit=$(GIT_COMMIT) -X $(BUILDINFO).date=$(GIT_DATE))

.PHONY: all build run test generate checkgenerate web-deps web notices vet fmt clean screenshots lint fuzz bench previous dist image

all: build

## run: build everything (UI included) and start agentassistant-srv
run: build
	./$(BIN)/agentassistant-srv $(RUNARGS)

## build: the UI, then the binaries into bin/
build: web
	$(NOTICES)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## dist: release archives for linux, macOS and Windows (amd64, arm64) into
## dist/, with checksums.txt, the Homebrew cask and the Scoop manifest; a
## snapshot: nothing is published (GoReleaser, a tool of tools/go.mod)
# GoReleaser reads the commit only where git names a remote: a clone
# without one names the project's, for this command alone.
DIST_ENV := $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/agentassistant/agentassistant.git)
# One build at a time (each go build uses every CPU anyway): the binaries
# then go into each archive in the same order, so the same commit gives
# the same archives and checksums.txt wherever it is built.
dist:
	$(DIST_ENV) $(TOOLS) goreleaser release --snapshot --clean --parallelism 1

## image: the container image as an OCI layout tarball,
## dist/agentassistant-image.tar, from the linux archives' binaries;
## no Docker engine needed (the Dockerfile is for those with one)
image:
	cd tools && $(GO) run ./ociimage -dist ../dist -out ../dist/agentassistant-image.tar

$(WEB)/node_modules/.package-lock.json: $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && $(NPM) ci --no-audit --no-fund
	@touch $@

web-deps: $(WEB)/node_modules/.package-lock.json

# The licences of the Go modules the binaries link and of the npm
# packages the UI build says it bundled: THIRD_PARTY_NOTICES.txt, for the
# archives, and a copy in the UI build, served at /notices. Not
# committed: it follows node_modules and the module cache of the build.
NOTICES := $(GO) run ./internal/notices

## notices: THIRD_PARTY_NOTICES.txt, the licences of what the binaries
## and the UI hold (after make web)
notices:
	$(NOTICES)

## web: build the UI into srv/webui/dist (embedded by go build)
web: web-deps
	cd $(WEB) && $(NPM) run build

## generate: regenerate gen/ and the UI's protobuf-es code from proto/
generate: web-deps
	$(BUF) generate

## checkgenerate: fail if the committed generated code is stale
checkgenerate: generate
	@git diff --quiet -- gen $(WEB)/src/gen && test -z "$$(git ls-files --others --exclude-standard -- gen $(WEB)/src/gen)" || { \
		echo "generated code is stale; run 'make generate' and commit:"; \
		git status --short -- gen $(WEB)/src/gen; exit 1; }

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...

## test: everything CI runs: Go (race detector), the UI's unit tests, and
## the browser tests (Debian's chromium; set CHROMIUM to use another)
test: checkgenerate vet build
	$(GO) test -race -count=1 -timeout 30m ./...
	cd $(WEB) && $(NPM) test
	cd $(WEB) && $(NPM) run e2e

## screenshots: refresh docs/*.png from the browser tests (remote-input.png
## also needs Xvfb, xterm, xdotool, and fonts-wqy-microhei for its Chinese)
screenshots: build
	cd $(WEB) && AA_SCREENSHOTS=$(CURDIR)/docs $(NPM) run e2e

## previous: agentassistant-srv of the release before (PREVIOUS, a commit
## or tag; the latest tag by default) into bin/previous/, from this
## clone's history, for the rolling upgrade test:
## AA_PREVIOUS_SRV=$PWD/bin/previous/agentassistant-srv go test -run TestClusterMCPRollingUpgrade ./e2e/
PREVIOUS ?= $(shell git describe --tags --abbrev=0 2>/dev/null)
previous:
	@test -n "$(PREVIOUS)" || { echo "no tag: name the release before, make previous PREVIOUS=<commit>"; exit 1; }
	src=$$(mktemp -d) && trap 'rm -rf "$$src"' EXIT && git archive $(PREVIOUS) | tar -x -C "$$src" && \
		(cd "$$src" && $(GO) build -o "$(CURDIR)/$(BIN)/previous/" ./cmd/agentassistant-srv)

## bench: measure every hop against the transport floor (bench/results.json)
bench: build
	$(GO) run ./bench

## lint: golangci-lint (with gosec) and govulncheck; govulncheck needs to
## reach vuln.go.dev and says so when it cannot
lint:
	$(GOLANGCI_LINT) run ./...
	@out=$$($(GOVULNCHECK) ./... 2>&1); rc=$$?; echo "$$out" | tail -20; \
	if [ $$rc -ne 0 ] && echo "$$out" | grep -q "fetching vulnerabilities"; then \
		echo "govulncheck: vulnerability database unreachable from here; dependencies NOT checked"; \
	elif [ $$rc -ne 0 ]; then exit $$rc; fi

## fuzz: a longer fuzzing run of every target (FUZZTIME each, default 1m)
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./srv/relay/
	$(GO) test -run '^$$' -fuzz FuzzGuard -fuzztime $(FUZZTIME) ./srv/auth/
	$(GO) test -run '^$$' -fuzz FuzzWSFrame -fuzztime $(FUZZTIME) ./srv/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./srv/store/
	$(GO) test -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) ./srv/store/
	$(GO) test -run '^$$' -fuzz FuzzParseFrame -fuzztime $(FUZZTIME) ./srv/wsconn/

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^gen/')

clean:
	rm -rf $(BIN) dist THIRD_PARTY_NOTICES.txt
