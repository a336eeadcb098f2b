#!/usr/bin/env bash
# Keeps the library's module graph lean. Builds scratch consumer modules in
# a temporary directory, each requiring this checkout's modules through
# replace lines (one per go.mod in the checkout, so that a module added
# later resolves too), runs go mod tidy, and fails if `go list -m all`
# lists more modules than its bound or any module of its heavy list,
# printing the list. A count is the consumer itself and every module
# outside the library; the library's own modules do not count: splitting
# the library into modules, so that users download less, must not count
# against it.
#
# The consumers:
#   - core and one backend, for each backend of BACKENDS: at most
#     MAX_MODULES, no fx, Prometheus, OpenTelemetry or tools;
#   - an fx program that configures fxmodule with the goredis driver and
#     imports its package, fxmodule/goredis: at most MAX_FX_MODULES, no
#     Prometheus, OpenTelemetry or tools, and no other driver's client
#     linked. The other drivers' modules are still listed (fxmodule's
#     go.mod requires them for its driver packages), but their own
#     requirements are not, and their code is not fetched.
#
# With module graph pruning a consumer sees every requirement of each
# module it requires (the root go.mod's and fxmodule's, `// indirect`
# ones included): whatever only tests, middleware, examples or tools need
# reaches every user unless it lives in a module of its own (see MODULES
# in the Makefile). Today's counts and why each module is there: README's
# install section.
#
# Needs the module proxy (or a module cache holding the graph).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
max=${MAX_MODULES:-15}
maxfx=${MAX_FX_MODULES:-23}
backends=${BACKENDS:-redigo goredis rueidis valkey}
tools='prometheus|opentelemetry|miniredis|honnef\.co|golang\.org/x/tools'
heavy=${HEAVY:-"go\\.uber\\.org/(fx|dig|zap)|$tools"}
heavyfx=${HEAVY_FX:-$tools}

export GOWORK=off
module=$(cd "$root" && $GO list -m)
goversion=$(cd "$root" && $GO list -m -f '{{.GoVersion}}')
# The version the modules are released at (the replace points it at the
# checkout), as a user's go.mod would require it.
version=$("$root/scripts/release-version.sh")
# Only for the scratch consumers, never for the checkout.
export GOFLAGS="${GOFLAGS:-} -mod=mod"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# replaces prints a replace line for every module of the checkout.
replaces() {
	local f dir path
	while IFS= read -r f; do
		dir=$(dirname "$f")
		path=$(sed -n 's/^module[[:space:]]*//p' "$f" | head -1)
		printf 'replace %s => %s\n' "$path" "$dir"
	done < <(find "$root" -name go.mod -not -path '*/testdata/*' -not -path '*/.git/*' | sort)
}

# consumer writes a scratch module in $tmp/$1 requiring the library's
# modules named by $2 (paths below $module, "" for the root), with main.go
# from stdin.
consumer() {
	local dir=$tmp/$1 m
	mkdir -p "$dir"
	{
		printf 'module example.com/leanconsumer\n\ngo %s\n\n' "$goversion"
		for m in $2; do
			[ "$m" = . ] && m= || m=/$m
			printf 'require %s%s %s\n' "$module" "$m" "$version"
		done
		echo
		replaces
	} >"$dir/go.mod"
	cat >"$dir/main.go"
}

failed=
# check tidies and builds consumer $1, prints its count as $2, and fails it when it
# lists more than $3 modules or any matching $4, or links a package matching
# $5 (when given).
check() {
	local dir=$tmp/$1 list own n bad linked=
	# Built too, so that a consumer that no longer compiles is seen.
	(cd "$dir" && $GO mod tidy && $GO build -o /dev/null .)
	list=$(cd "$dir" && $GO list -m all)
	own=$(printf '%s\n' "$list" | grep -cE "^$module(/[^ ]*)? " || true)
	n=$(($(printf '%s\n' "$list" | wc -l) - own))
	bad=$(printf '%s\n' "$list" | grep -E "$4" || true)
	if [ -n "${5:-}" ]; then
		linked=$(cd "$dir" && $GO list -deps . | grep -E "$5" || true)
	fi
	echo "$2: $n modules (at most $3) and $own of the library's own ($((n + own)) in go list -m all), go $(cd "$dir" && $GO list -m -f '{{.GoVersion}}')"
	if [ "$n" -gt "$3" ] || [ -n "$bad" ] || [ -n "$linked" ]; then
		[ -n "$bad" ] && printf 'heavy modules in the graph:\n%s\n' "$bad" >&2
		[ -n "$linked" ] && printf 'packages linked that the program did not ask for:\n%s\n' "$linked" >&2
		printf '%s\n' "$list" | sed 's/^/    /' >&2
		failed="$failed $1"
	fi
}

for b in $backends; do
	mods=.
	# A backend with a module of its own, so that users of the others
	# do not download its driver.
	[ -f "$root/backends/$b/go.mod" ] && mods=". backends/$b"
	consumer "$b" "$mods" <<EOF
// A consumer of core and one backend, nothing else.
package main

import (
	_ "$module/backends/$b"
	_ "$module/core"
)

func main() {}
EOF
	check "$b" "core + backends/$b" "$max" "$heavy"
done

consumer fx-goredis "fxmodule" <<EOF
// An fx program that configures quorumlock with the goredis driver.
package main

import (
	"go.uber.org/fx"

	"$module/fxmodule"
	_ "$module/fxmodule/goredis"
)

func main() {
	_ = fx.New(fxmodule.Module, fx.Supply(fxmodule.Config{Driver: fxmodule.DriverGoRedis}))
}
EOF
# The other drivers' clients must not be linked: fxmodule imports none.
check fx-goredis "fxmodule, driver goredis" "$maxfx" "$heavyfx" \
	'^github\.com/(redis/rueidis|valkey-io/valkey-go|gomodule/redigo)(/|$)'


if [ -n "$failed" ]; then
	echo "lean-modules: a consumer has too many modules ($failed); move the requirement out of the go.mod it comes from into a module of its own" >&2
	exit 1
fi
