#!/usr/bin/env bash
# Keeps the library's module graph lean. For each backend, builds a scratch
# consumer module in a temporary directory that imports core and that one
# backend and requires this checkout through a replace (and the backend's
# own module through another, for a backend that is a module of its own,
# such as backends/valkey), runs go mod tidy,
# and fails if `go list -m all` lists more than MAX_MODULES modules (the
# consumer itself included, the library's own modules not: splitting the
# library into modules, so that users download less, must not count
# against it) or any module of HEAVY, printing the list.
#
# A backend in a module of its own pays for the root go.mod's drivers all
# the same: a consumer of core + backends/valkey lists go-redis, redigo and
# rueidis, which the root module requires for its backends, beside
# valkey-go.
#
# With module graph pruning a consumer sees every requirement of the root
# go.mod, `// indirect` ones included: whatever only middleware, examples,
# the fx module or tools need belongs in a module of its own (see MODULES
# in the Makefile), not in the root go.mod.
#
# Needs the module proxy (or a module cache holding the graph).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
max=${MAX_MODULES:-15}
backends=${BACKENDS:-redigo goredis rueidis valkey}
heavy=${HEAVY:-'go\.uber\.org/(fx|dig|zap)|prometheus|opentelemetry|miniredis|honnef\.co|golang\.org/x/tools'}

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

failed=
for b in $backends; do
	dir=$tmp/$b
	mkdir -p "$dir"
	cat >"$dir/go.mod" <<EOF
module example.com/leanconsumer

go $goversion

require $module $version

replace $module => $root
EOF
	if [ -f "$root/backends/$b/go.mod" ]; then
		# A backend with a module of its own, so that users of the
		# others do not download its driver.
		printf '\nrequire %s %s\n\nreplace %s => %s\n' \
			"$module/backends/$b" "$version" "$module/backends/$b" "$root/backends/$b" >>"$dir/go.mod"
	fi
	cat >"$dir/main.go" <<EOF
// A consumer of core and one backend, nothing else.
package main

import (
	_ "$module/backends/$b"
	_ "$module/core"
)

func main() {}
EOF
	(cd "$dir" && $GO mod tidy)
	list=$(cd "$dir" && $GO list -m all)
	own=$(printf '%s\n' "$list" | grep -cE "^$module(/[^ ]*)? " || true)
	n=$(($(printf '%s\n' "$list" | wc -l) - own))
	bad=$(printf '%s\n' "$list" | grep -E "$heavy" || true)
	echo "core + backends/$b: $n modules (at most $max) and $own of the library's own, go $(cd "$dir" && $GO list -m -f '{{.GoVersion}}')"
	if [ "$n" -gt "$max" ] || [ -n "$bad" ]; then
		[ -n "$bad" ] && printf 'heavy modules in the graph:\n%s\n' "$bad" >&2
		printf '%s\n' "$list" | sed 's/^/    /' >&2
		failed="$failed $b"
	fi
done
if [ -n "$failed" ]; then
	echo "lean-modules: a consumer of core and one backend has too many modules ($failed); move the requirement out of the root go.mod into a module of its own" >&2
	exit 1
fi
