# agentassistant: `make run` starts the server with its web UI, `make test`
# runs every test. Both work on a fresh clone with Go and Node.js installed.

GO      ?= go
NPM     ?= npm
BIN     := bin
WEB     := web
BUF     := $(WEB)/node_modules/.bin/buf
RUNARGS ?=

.PHONY: all build run test generate checkgenerate web-deps web vet fmt clean screenshots

all: build

## run: build everything (UI included) and start agentassistant-srv
run: build
	./$(BIN)/agentassistant-srv $(RUNARGS)

## build: the UI, then both binaries into bin/
build: web
	$(GO) build -o $(BIN)/ ./cmd/...

$(WEB)/node_modules/.package-lock.json: $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && $(NPM) ci --no-audit --no-fund
	@touch $@

web-deps: $(WEB)/node_modules/.package-lock.json

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

## test: everything CI runs: Go (race detector), the UI's unit tests, and
## the browser tests (Debian's chromium; set CHROMIUM to use another)
test: checkgenerate vet build
	$(GO) test -race -count=1 ./...
	cd $(WEB) && $(NPM) test
	cd $(WEB) && $(NPM) run e2e

## screenshots: refresh docs/*.png from the browser tests
screenshots: build
	cd $(WEB) && AA_SCREENSHOTS=$(CURDIR)/docs $(NPM) run e2e

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^gen/')

clean:
	rm -rf $(BIN)
