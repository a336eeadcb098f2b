# quorumlock: the one test command is `make test`; CI runs it through .ci/run.

GO       ?= go
# Every module is checked on its own graph, as a user's build sees it: the
# workspace (go.work) is for people in a checkout, so that
# `go run ./examples/quickstart` works from the top directory.
export GOWORK := off
# The modules that vet, staticcheck, purity, unit and tidy cover, by
# directory: "." is the library (the root go.mod, kept small: every one of
# its requirements reaches every user, see `make modules`); the others
# require it through a replace to the checkout. benchmarks/ is a module
# too, covered by bench-smoke.
MODULES  ?= . backends/valkey middleware/metrics middleware/tracing examples fxmodule cmd/quorumlock conformance/safety
# The root module's packages for vet, staticcheck and unit (the other
# modules always run ./...), e.g. make unit MODULES=. PKGS=./core/...
PKGS     ?= ./...
# staticcheck is a tool of its own module, out of the library's go.mod.
TOOLS_MODFILE := $(CURDIR)/internal/tools/go.mod
# Packages that must stay free of drivers and heavy dependencies.
PURE     := ./core/... ./strategies/...
DRIVERS  := go-redis|redigo|rueidis|valkey-io|go\.uber\.org/fx|miniredis
FORBIDDEN := $(DRIVERS)|prometheus|opentelemetry
# Flags for lockbench in `make bench`, e.g. -quick or -nodes 3.
LOCKBENCH_FLAGS ?=

.PHONY: test slowest long redis vet staticcheck purity unit examples quickstart bench bench-drivers bench-smoke chaos fuzz tidy modules versions consumer release

## test: everything CI checks: redis-server present, vet, staticcheck, the
## driver-free seam, every test with the race detector, every example
## program, a short run of the benchmark program, tidy go.mod files and
## a lean module graph for users, and real versions between the modules;
## each over every module of MODULES; and a user's build of the published
## modules with no replace (consumer). The phases run in this order and
## stop at the first that fails; at the end, failed or not, test prints
## each phase's wall time and the costliest tests (make slowest).
TEST_PHASES := redis vet staticcheck purity unit examples bench-smoke tidy modules versions consumer
test:
	@rm -rf $(TESTJSON); times=$$(mktemp); status=0; start=$$(date +%s); \
	for p in $(TEST_PHASES); do \
		t0=$$(date +%s); \
		$(MAKE) --no-print-directory $$p || status=$$?; \
		printf '%8ds  %s\n' $$(( $$(date +%s) - t0 )) $$p >> $$times; \
		[ $$status = 0 ] || { echo "make test: $$p failed" >&2; break; }; \
	done; \
	echo "== wall time per phase"; cat $$times; rm -f $$times; \
	printf '%8ds  %s\n' $$(( $$(date +%s) - start )) 'make test, in all'; \
	$(MAKE) --no-print-directory slowest; \
	exit $$status

## slowest: the ten costliest top-level and leaf tests of the last make
## unit, from its go test -json records in $(TESTJSON).
slowest:
	@cd internal/tools && $(GO) run ./cmd/slowest -n 10 $(TESTJSON)

## redis: install redis-server and libfaketime (Debian's redis-server and
## faketime packages) when they are missing: the safety rig's envelope runs
## a server with a fast clock.
redis:
	@scripts/ensure-redis.sh
	@scripts/ensure-faketime.sh

# in_modules runs a command in each module of MODULES (or of its second
# argument), with $pkgs set to its packages, and fails, naming them, if it
# fails in any.
in_modules = failed=; for m in $(or $(2),$(MODULES)); do \
		pkgs=./...; [ "$$m" = . ] && pkgs='$(PKGS)'; \
		echo "== $@: $$m"; \
		(cd $$m && $(1)) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "$@ failed in:$$failed" >&2; exit 1; fi

vet:
	@$(call in_modules,$(GO) vet $$pkgs)

staticcheck:
	@$(call in_modules,$(GO) tool -modfile=$(TOOLS_MODFILE) staticcheck $$pkgs)

## purity: core and strategies import no driver, no fx, no metrics, no
## tracing; the middleware packages (root's and their own modules') no
## driver and no fx.
purity_check = bad=$$(cd $(1) && $(GO) list -deps $(2) | grep -E '$(3)' || true); \
	if [ -n "$$bad" ]; then echo "$(2) of $(1) depends on: $$bad" >&2; exit 1; fi
purity:
	@$(call purity_check,.,$(PURE),$(FORBIDDEN))
	@$(call purity_check,.,./middleware/...,$(DRIVERS))
	@$(call purity_check,middleware/metrics,./...,$(DRIVERS))
	@$(call purity_check,middleware/tracing,./...,$(DRIVERS))

## unit: every package's tests with the race detector, the safety rig's
## module (conformance/safety) last and alone: its five servers and 16
## clients load both cores for half a minute, and the conformance suites'
## timing checks (a paused server must cost one node timeout, not more)
## should not share the machine with it.
## Each module's `go test -json` goes to $(TESTJSON)/<module>.json
## (through gotestsum, a tool of internal/tools: one line per package on
## the console, and the output of every failed test at the end), which
## `make slowest` reads.
SAFETY := conformance/safety
TESTJSON ?= $(CURDIR)/.testjson
## UNIT_PARALLEL is go test's -parallel: the conformance suites' tests
## spend most of their time waiting (servers and clusters starting, node
## timeouts, retry delays), so four at a time per package, on two cores,
## cut backends/goredis from 90 s to about 60 s (go test's default is
## GOMAXPROCS, here 2).
UNIT_PARALLEL ?= 4
gotest = $(GO) tool -modfile=$(TOOLS_MODFILE) gotestsum --format pkgname \
	--jsonfile $(TESTJSON)/$$(echo "$$m" | sed 's|^\.$$|root|; s|/|_|g').json -- -race -count=1 -parallel $(UNIT_PARALLEL)
UNIT_TIMEOUT ?= 20m
unit:
	@rm -rf $(TESTJSON) && mkdir -p $(TESTJSON)
	@$(if $(filter-out $(SAFETY),$(MODULES)),$(call in_modules,$(gotest) -timeout $(UNIT_TIMEOUT) $$pkgs,$(filter-out $(SAFETY),$(MODULES))))
	@$(if $(filter $(SAFETY),$(MODULES)),$(call in_modules,$(gotest) -timeout $(UNIT_TIMEOUT) $$pkgs,$(SAFETY)))

## long: unit in its long form, not part of test: every conformance.Run
## over the whole strategy × size matrix, whatever its driver, with 200
## increments per goroutine in MutualExclusion and 2000 fenced
## acquisitions (QUORUMLOCK_LONG=1; test runs one point of the matrix per
## driver, 50 and 500: see conformance's package doc, Scope); core's
## TestModel over MODEL_SEEDS seeds (500 in test); the safety rig's
## TestSafety over LONG_SAFETY_SEEDS (3 in test). Then, failed or not,
## the costliest tests. Narrow it with MODULES and PKGS, as unit.
LONG_SAFETY_SEEDS ?= 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20
long: redis
	@status=0; \
	QUORUMLOCK_LONG=1 QUORUMLOCK_MODEL_SEEDS=$(MODEL_SEEDS) QUORUMLOCK_SAFETY_SEEDS=$(LONG_SAFETY_SEEDS) \
		$(MAKE) --no-print-directory unit UNIT_TIMEOUT=60m || status=$$?; \
	$(MAKE) --no-print-directory slowest; \
	exit $$status

## examples: run every program of examples/ (a module of its own) as a
## user in a checkout would, from the top directory through the workspace
## (go run ./examples/NAME, on its embedded servers unless REDIS_ADDRS is set),
## each a few seconds; fails, naming them, if any exits non-zero.
EXAMPLES := quickstart httpservice drivers strategies fxapp
examples:
	@failed=; for e in $(EXAMPLES); do \
		echo "== go run ./examples/$$e"; \
		GOWORK= $(GO) run ./examples/$$e || failed="$$failed $$e"; \
		echo; \
	done; \
	if [ -n "$$failed" ]; then echo "examples failed:$$failed" >&2; exit 1; fi

## quickstart: the README's first command.
quickstart:
	GOWORK= $(GO) run ./examples/quickstart

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
## (cmd/chaos of conformance/safety, a module of its own): 50 seeds of
## 12 s, each over five redis-servers behind
## fault proxies with 16 clients, every fault kind, drivers in turn; about
## 13 minutes. Prints acquisitions, faults by kind, violations (must be 0),
## lock keys left after the TTL (must be 0) and the slowest acquisition;
## fails on a violation or a key left. Then the same rig's other workloads,
## CHAOS_KIND_SEEDS seeds each (default 5, about a minute each): rw (shared
## locks read a register that plain locks write), multi (AcquireAll
## over overlapping sets of keys) and semaphore (AcquirePermit, 2 permits
## a key: a count of holders that must never pass 2). CHAOS_FLAGS passes flags to all
## (make chaos CHAOS_FLAGS="-seeds 5 -v"). Last, the safety envelope
## (cmd/envelope): one server's clock fast under libfaketime (x1 to x1.05), holders paused
## below and past the TTL, with and without fencing; about 30 s. Prints
## docs/safety.md's table; fails on a violation theory does not predict.
## ENVELOPE_FLAGS passes flags (make chaos ENVELOPE_FLAGS="-trials 20").
CHAOS_FLAGS ?=
CHAOS_KIND_SEEDS ?= 5
ENVELOPE_FLAGS ?=
MODEL_SEEDS ?= 10000
chaos: redis
	QUORUMLOCK_MODEL_SEEDS=$(MODEL_SEEDS) $(GO) test -race -run TestModel -count=1 -timeout 60m ./core/
	cd $(SAFETY) && $(GO) run ./cmd/chaos $(CHAOS_FLAGS)
	cd $(SAFETY) && $(GO) run ./cmd/chaos -workload rw -seeds $(CHAOS_KIND_SEEDS) $(CHAOS_FLAGS)
	cd $(SAFETY) && $(GO) run ./cmd/chaos -workload multi -seeds $(CHAOS_KIND_SEEDS) $(CHAOS_FLAGS)
	cd $(SAFETY) && $(GO) run ./cmd/chaos -workload semaphore -seeds $(CHAOS_KIND_SEEDS) $(CHAOS_FLAGS)
	cd $(SAFETY) && $(GO) run ./cmd/envelope $(ENVELOPE_FLAGS)

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

## tidy: go mod tidy would change no go.mod or go.sum, in any module
## (MODULES, benchmarks and the tools module).
tidy:
	@failed=; for m in $(MODULES) benchmarks internal/tools; do \
		(cd $$m && $(GO) mod tidy -diff) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "go mod tidy would change:$$failed (run it there)" >&2; exit 1; fi

## modules: a user's module importing core and one backend (each in turn)
## lists at most 15 modules in go list -m all, and no fx, Prometheus,
## OpenTelemetry, miniredis or tool; an fx program configuring the goredis
## driver at most 23 (the library's own modules not counted) and links no
## other driver: whatever a
## required go.mod requires reaches every user. Builds scratch modules in
## a temporary directory.
modules:
	@GO=$(GO) scripts/lean-modules.sh

## versions: every go.mod requires the project's other modules at the
## release version, never v0.0.0 or a pseudo-version (Go ignores a
## dependency's replace lines: a user's build would ask for it and fail);
## fails naming the go.mod.
versions:
	@scripts/release-version.sh >/dev/null

## release: make release VERSION=vX.Y.Z sets every requirement between the
## modules to VERSION, tidies them, runs vet, versions, tidy and modules
## (RELEASE_TEST=1: the whole of test), runs gorelease against each
## published module's last release, and prints the tags to push; it tags
## and pushes nothing. See docs/contributing.md.
release:
	@GO=$(GO) scripts/release.sh '$(VERSION)'

## consumer: a user with no replace installs and builds every published
## module at the release version (scripts/release-version.sh). Writes a module proxy on disk from
## the working tree (internal/tools's modproxy: each module's zip, and its
## go.mod as committed), then in a scratch module outside the checkout, with
## GOPROXY=file://<proxy> ahead of the usual proxy, runs the install lines of
## README.md and docs/ as written, builds programs using core and every
## backend, fxmodule, metrics and tracing, and go installs cmd/quorumlock.
## Fails, naming it, on a module a user cannot resolve, such as a
## requirement at a version the release does not tag.
consumer:
	@GO=$(GO) scripts/consumer.sh
