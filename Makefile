# quorumlock: the one test command is `make test`; CI runs it through .ci/run.

GO       ?= go
PKGS     ?= ./...
# Packages that must stay free of drivers and heavy dependencies.
PURE     := ./core/... ./strategies/...
FORBIDDEN := go-redis|redigo|rueidis|go\.uber\.org/fx|prometheus|opentelemetry

.PHONY: test redis vet staticcheck purity unit quickstart bench

## test: everything CI checks: redis-server present, vet, staticcheck, the
## driver-free seam, and every test with the race detector.
test: redis vet staticcheck purity unit

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

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## quickstart: the README's first command.
quickstart:
	$(GO) run ./examples/quickstart

## bench: the driver benchmarks against real redis-server processes, with
## allocations. Not part of test: figures need a quiet machine.
bench: redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...
