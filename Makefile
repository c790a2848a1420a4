# The OTA update service. `make run` serves against the local Postgres and
# Redis (migrated); `make test` runs lint, the generated-code check and every
# test with the race detector.
SHELL := /bin/bash
GO    ?= go
BIN   ?= otad
PKGS  := ./...

# Local services, used by the tests when they answer and the caller did not
# name others. With neither, the integration tests start testcontainers (if
# a Docker engine answers) or skip.
PG_UP    := $(shell timeout 1 bash -c '</dev/tcp/127.0.0.1/5432' 2>/dev/null && echo yes)
REDIS_UP := $(shell timeout 1 bash -c '</dev/tcp/127.0.0.1/6379' 2>/dev/null && echo yes)
ifeq ($(PG_UP),yes)
OTA_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
endif
ifeq ($(REDIS_UP),yes)
OTA_TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
endif
export OTA_TEST_DATABASE_URL OTA_TEST_REDIS_URL

.PHONY: all build run test test-unit lint generate generate-check fuzz fuzz-smoke fuzz-run load clean clean-test-dbs

all: build

# The binary says which build it is (`otad version`, and the "otad starting"
# log line): the nearest tag or commit from git describe ("-dirty" for a
# modified tree) and the commit. Outside a git checkout both fall back to
# what the Go toolchain recorded (see main.go).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

## build: compile the otad binary, stamped with its version and commit
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

## run: serve on :8080 against local Postgres and Redis (creates and migrates the ota database)
run: build
	@OTA_ADMIN_TOKEN="$${OTA_ADMIN_TOKEN:-dev-admin-token-change-me}" ./$(BIN) serve --create-db

## test: lint, check generated code, then every test with -race
test: lint generate-check
	$(GO) test -race -shuffle=on -count=1 -timeout 15m $(PKGS)
	@$(MAKE) --no-print-directory fuzz-smoke

## test-unit: the fast tests only (no Postgres, Redis or binary)
test-unit:
	$(GO) test -race -shuffle=on -count=1 ./domain/... ./application/... ./adapters/memory/... ./adapters/rest/... ./adapters/httpedge/...

## lint: gofmt, go vet, staticcheck
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

## generate: regenerate wire_gen.go
generate:
	$(GO) tool wire gen .

## generate-check: fail when the committed wire_gen.go is stale
generate-check:
	@tmp=$$(mktemp -d); cp wire_gen.go $$tmp/wire_gen.go; \
	  $(GO) tool wire gen . >/dev/null || { rm -rf $$tmp; exit 1; }; \
	  if ! diff -u $$tmp/wire_gen.go wire_gen.go; then cp $$tmp/wire_gen.go wire_gen.go; rm -rf $$tmp; \
	    echo "wire_gen.go is stale: run 'make generate' and commit it"; exit 1; fi; \
	  rm -rf $$tmp; echo "wire_gen.go is fresh"

# `go test -fuzz` takes one package and one target per run, so targets are
# discovered (every `func FuzzXxx` in a _test.go file) and run one by one.
# Each first replays its committed corpus as a plain test: -fuzztime also
# bounds the baseline corpus pass, so a short run could miss a known crasher.
FUZZTIME       ?= 60s
FUZZSMOKETIME  ?= 3s

## fuzz: run every fuzz target for FUZZTIME each (default 60s)
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME)

## fuzz-smoke: run every fuzz target for FUZZSMOKETIME each (~3s); part of `make test`
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZSMOKETIME)

# The fuzzing engine can end a run whose -fuzztime expired mid-input with
# "context deadline exceeded" and no failing input (a flake of the engine,
# not a finding, likelier on a loaded machine): such a run is tried again,
# up to three times in all. A real finding always writes its input under
# testdata/fuzz and fails at once.
fuzz-run:
	@set -uo pipefail; n=0; failed=""; \
	fuzz_once() { for try in 1 2 3; do out=$$(mktemp); \
	    $(GO) test -run '^$$' -fuzz "^$$2\$$" -fuzztime $(FUZZ_FOR) "$$1" 2>&1 | tee "$$out"; rc=$${PIPESTATUS[0]}; \
	    flake=0; if [ "$$rc" -ne 0 ] && grep -q 'context deadline exceeded' "$$out" && ! grep -q 'Failing input written to' "$$out"; then flake=1; fi; \
	    rm -f "$$out"; \
	    if [ "$$flake" -eq 0 ] || [ "$$try" -eq 3 ]; then return $$rc; fi; \
	    echo "== $$1 $$2: the engine stopped at its deadline without a finding; again"; \
	  done; }; \
	for f in $$(grep -rl --include='*_test.go' --exclude-dir=testdata --exclude-dir=vendor '^func Fuzz' . | sort); do \
	  pkg=./$$(dirname "$${f#./}"); \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "== $$pkg $$t ($(FUZZ_FOR))"; n=$$((n+1)); \
	    $(GO) test -count=1 -run "^$$t\$$" "$$pkg" >/dev/null \
	      && fuzz_once "$$pkg" "$$t" \
	      || { failed="$$failed $$pkg:$$t"; $(GO) test -count=1 -run "^$$t\$$" "$$pkg" | tail -n 40; }; \
	  done; \
	done; \
	[ "$$n" -gt 0 ] || { echo "no fuzz targets found"; exit 1; }; \
	if [ -n "$$failed" ]; then echo "fuzz targets failed:$$failed"; exit 1; fi; \
	echo "fuzzed $$n targets for $(FUZZ_FOR) each"

## load: run the fleet simulator against a running otad (ARGS="-devices 10000 -mode poll -duration 10s")
load:
	$(GO) run ./tests/load $(ARGS)

clean:
	rm -f $(BIN)

# The tests clone one database per test (test_ + 16 hex digits) from a
# migrated template (ota_template_ + a hash of the migrations, marked
# IS_TEMPLATE; a new one appears whenever the migrations change). Clones
# are dropped when their test ends; a killed test run leaves them behind,
# and old templates stay until removed. Only databases with no session are
# dropped, and DROP DATABASE itself refuses one that gained a session
# meanwhile — but a test binary that is just starting may be about to clone
# a template: run this when no tests are running.
CLEAN_DB_URL ?= $(or $(OTA_TEST_DATABASE_URL),postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)

## clean-test-dbs: drop the test databases (ota_template_*, test_<hex>) no one is connected to
clean-test-dbs:
	@set -uo pipefail; n=0; \
	for db in $$(psql "$(CLEAN_DB_URL)" -XAtq -v ON_ERROR_STOP=1 -c \
	    "SELECT datname FROM pg_database d WHERE (datname LIKE 'ota\_template\_%' OR datname ~ '^test_[0-9a-f]{16}$$') \
	       AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname) ORDER BY 1"); do \
	  psql "$(CLEAN_DB_URL)" -XAtq -c "ALTER DATABASE \"$$db\" WITH IS_TEMPLATE false" -c "DROP DATABASE \"$$db\"" \
	    && { echo "dropped $$db"; n=$$((n+1)); } || echo "kept $$db (in use)"; \
	done; echo "dropped $$n test databases"

# ---- make bench: the check path measured from outside (tests/bench/bench.sh)
# Not part of `make test` (a smoke run of the script is, in ./tests/bench).
# Takes ~3 minutes plus, the first time, seeding 1M devices; BENCH_*
# variables tune it (see the script's header), e.g. BENCH_RUNS=1, and OTA_*
# ones reach otad: `OTA_DB_MAX_CONNS=16 make bench`.
.PHONY: bench

## bench: wrk + pgbench -S on 1M seeded devices, then an open loop; summary in /tmp/ota-bench/results.md
bench:
	tests/bench/bench.sh

# ---- make bench-downloads: 50 concurrent downloads of a 1 GiB hosted
# artifact from otad, then from nginx serving the same file (DL_* variables
# tune it, see tests/bench/downloads.sh); a few minutes, not part of `make test`.
.PHONY: bench-downloads

## bench-downloads: otad's download throughput vs nginx on one 1 GiB artifact, RSS sampled; table in /tmp/ota-bench-downloads/results.md
bench-downloads:
	tests/bench/downloads.sh
