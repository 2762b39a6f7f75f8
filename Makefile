# make test runs everything CI runs: installs the Debian packages the tests
# need, then vet, staticcheck, unit tests with -race, crash tests and
# bounded fuzzing. See .ci/run.
GO ?= go
# 4 s per target: scripts/fuzz.sh builds each package's fuzz binary once, and
# its 57 targets take about 6 minutes on 2 cores (6.5 s a target), which with
# the unit run (about 11 minutes: database, browser and cluster tests
# included, the long model and crash tests without -race) keeps make test
# under 20 minutes (CI allows 20; 5 s a target made 18.6 minutes on
# 2026-12-06 once the cluster's transaction and reassignment tests landed);
# fuzz longer by hand: make fuzz FUZZTIME=5m.
FUZZTIME ?= 4s

.PHONY: test deps check unit fuzz build run

# The version stamped into bin/sluice: the nearest tag, the commits since
# it and the commit (v1.2.0-3-gabc1234), "-dirty" with uncommitted changes;
# a checkout without tags gives the commit alone. cmd/sluice's version.go
# prints it with the commit and time go build records (debug.ReadBuildInfo),
# which is also all a plain `go build` or `go run` gets ("dev").
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

test: deps check unit fuzz

# The Debian packages the interop tests need (real clients, openssl); the
# tests fail rather than skip when one is missing.
deps:
	@./scripts/test-deps.sh

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/sluice ./cmd/sluice
	$(GO) build -o bin/sluice-bench ./cmd/sluice-bench

# Builds bin/sluice, saying so first (a fresh machine downloads modules and
# compiles for a minute or more, which `go run` does in silence), then starts
# the broker with ARGS (make run ARGS="--data-dir /tmp/d").
ARGS ?=
run:
	@echo "building bin/sluice $(VERSION) (the first build downloads modules and compiles: a minute or two)…"
	@$(GO) build -ldflags "$(LDFLAGS)" -o bin/sluice ./cmd/sluice
	@echo "starting: bin/sluice serve $(ARGS)"
	@exec ./bin/sluice serve $(ARGS)

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...

# The unit tests with -race, then (scripts/norace-tests.sh) the model and
# crash tests that skip themselves under -race (internal/testrace: one
# goroutine through thousands of steps, ten times slower with it), without.
unit:
	$(GO) test -race -count=1 -timeout 12m ./...
	@./scripts/norace-tests.sh -timeout 10m

# Each fuzz target runs for FUZZTIME; scripts/fuzz.sh finds every func Fuzz* in
# the module's _test.go files, so a new target needs no list.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

# Regenerates the native API's Go code (proto/sluice/v1/*.pb.go and
# sluicev1connect/) from proto/sluice/v1/*.proto. buf comes through the Go
# module proxy at a pinned version; its plugins run with `go run` at the
# versions in go.mod (buf.gen.yaml), so no remote plugin is used.
BUF_VERSION ?= v1.75.0
.PHONY: proto
proto:
	rm -f proto/sluice/v1/*.pb.go proto/sluice/v1/sluicev1connect/*.connect.go
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) lint
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) generate
