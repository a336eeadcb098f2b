# quorumlock: the one test command is `make test`; CI runs it through .ci/run.

GO       ?= go
PKGS     ?= ./...
# Packages that must stay free of drivers and heavy dependencies.
PURE     := ./core/... ./strategies/...
FORBIDDEN := go-redis|redigo|rueidis|go\.uber\.org/fx|prometheus|opentelemetry
# Flags for lockbench in `make bench`, e.g. -quick or -nodes 3.
LOCKBENCH_FLAGS ?=

.PHONY: test redis vet staticcheck purity unit examples quickstart bench bench-drivers bench-smoke chaos fuzz

## test: everything CI checks: redis-server present, vet, staticcheck, the
## driver-free seam, every test with the race detector, every example
## program, and a short run of the benchmark program.
test: redis vet staticcheck purity unit examples bench-smoke

## redis: install redis-server (Debian package) when it is missing.
redis:
	@scripts/ensure-redis.sh

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

## purity: core and strategies import no driver, no fx, no metrics, no tracing.
purity:
	@bad=$$($(GO) list -deps $(PURE) | grep -E '$(FORBIDDEN)' || true); \
	if [ -n "$$bad" ]; then echo "core/strategies depend on: $$bad" >&2; exit 1; fi

## unit: every package's tests with the race detector, except the safety
## run, which runs alone afterwards (safety): its five servers and 16
## clients load both cores for half a minute, and the conformance suites'
## timing checks (a paused server must cost one node timeout, not more)
## should not share the machine with it.
SAFETY := ./conformance/safety
unit:
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -v '/conformance/safety$$')
	$(GO) test -race -count=1 -timeout 10m $(SAFETY)

## examples: run every program of examples/ as a user would (go run, on
## its embedded servers unless REDIS_ADDRS is set), each a few seconds;
## fails, naming them, if any exits non-zero.
EXAMPLES := quickstart httpservice drivers strategies fxapp
examples:
	@failed=; for e in $(EXAMPLES); do \
		echo "== go run ./examples/$$e"; \
		$(GO) run ./examples/$$e || failed="$$failed $$e"; \
		echo; \
	done; \
	if [ -n "$$failed" ]; then echo "examples failed:$$failed" >&2; exit 1; fi

## quickstart: the README's first command.
quickstart:
	$(GO) run ./examples/quickstart

## bench: the micro-benchmarks of core and strategies, then lockbench
## (benchmarks/, a module of its own): quorumlock against redsync,
## rueidislock, bsm/redislock and library-free floors on real redis-server
## processes, about six minutes; LOCKBENCH_FLAGS passes it flags
## (make bench LOCKBENCH_FLAGS=-quick). Not part of test: figures need a
## quiet machine.
bench: redis
	$(GO) test -run '^$$' -bench . -benchmem ./core/... ./strategies/...
	cd benchmarks && $(GO) run ./cmd/lockbench $(LOCKBENCH_FLAGS)

## bench-drivers: the driver benchmarks against real redis-server
## processes, with allocations.
bench-drivers: redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...

## bench-smoke: vet and test the benchmarks module and run lockbench once
## briefly (-quick, under a minute), keeping no JSON: part of test, so the
## benchmark program cannot rot.
bench-smoke: redis
	cd benchmarks && $(GO) vet ./... && $(GO) test -race -count=1 ./... && $(GO) run ./cmd/lockbench -quick -json /dev/null > /dev/null

## chaos: the long runs. First core's model-based test (TestModel) over
## MODEL_SEEDS seeds instead of the 500 of `make test`: random programs of
## every call over shared memory nodes with faults, checked against a
## reference model, in fake time; a few minutes. Then the safety run
## (cmd/chaos): 50 seeds of 12 s, each over five redis-servers behind
## fault proxies with 16 clients, every fault kind, drivers in turn; about
## 13 minutes. Prints acquisitions, faults by kind, violations (must be 0),
## lock keys left after the TTL (must be 0) and the slowest acquisition;
## fails on a violation or a key left. CHAOS_FLAGS passes flags (make chaos
## CHAOS_FLAGS="-seeds 5 -v").
CHAOS_FLAGS ?=
MODEL_SEEDS ?= 10000
chaos: redis
	QUORUMLOCK_MODEL_SEEDS=$(MODEL_SEEDS) $(GO) test -race -run TestModel -count=1 -timeout 60m ./core/
	$(GO) run ./cmd/chaos $(CHAOS_FLAGS)

## fuzz: every fuzz target for FUZZTIME each (default 60s); the seed
## corpora under testdata/fuzz run in every `make test`.
FUZZTIME ?= 60s
FUZZ_TARGETS := ./core:FuzzKeys ./core:FuzzHashSlotTags ./core:FuzzOptions ./core:FuzzRetryPolicies ./core:FuzzRestartGuard ./strategies:FuzzTally
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done
