#!/usr/bin/env bash
# Proves that a user with no replace can install and build every published
# module of this repository at the release version, without a release: it
# builds a module proxy on disk from the working tree (internal/tools's
# modproxy: each published module's zip, and its go.mod as committed, at
# VERSION), then, in a scratch module outside the checkout with no replace
# and GOPROXY=file://<proxy> ahead of the usual proxy, runs the install
# lines of README.md's install section and of docs/*.md exactly as written
# (with @VERSION when a line has none), builds a program importing core and
# every backend, one using fxmodule, one using middleware/metrics and
# middleware/tracing, and adds cmd/quorumlock@VERSION as a tool (go get -tool).
#
# Each published module is also fetched alone in a module of its own.
#
# Fails, naming the module, when a user could not resolve one: a
# requirement between the repository's modules at a version the release
# does not tag (say v0.0.0, kept alive in a checkout by a replace) is asked
# of the proxies and not found. It also fails if the build picked any of
# the repository's modules at a version other than VERSION, and, last, if
# any published go.mod requires one at another version (modproxy -check),
# which a higher requirement in the graph can hide from a build.
#
# Third-party modules come from the local module cache, then the usual
# proxy; the scratch module cache is thrown away, so that a module of this
# repository is never served from a stale cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
version=${VERSION:-$("$root/scripts/release-version.sh")}

export GOWORK=off
module=$(cd "$root" && $GO list -m)
goversion=$(cd "$root" && $GO list -m -f '{{.GoVersion}}')
usual_proxy=$($GO env GOPROXY)
cache=$($GO env GOMODCACHE)

tmp=$(mktemp -d)
# The scratch module cache is writable (-modcacherw) so that it can go.
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# modproxy runs internal/tools's proxy builder on this checkout at version,
# built before the user's environment below is set.
(cd "$root/internal/tools" && $GO build -o "$tmp/modproxy" ./cmd/modproxy)
modproxy() { "$tmp/modproxy" -root "$root" -version "$version" "$@"; }

echo "== proxy: the published modules at $version"
published=$(modproxy -out "$tmp/proxy")
echo "$published"

export GOPROXY="file://$tmp/proxy,file://$cache/cache/download,$usual_proxy"
export GOMODCACHE=$tmp/modcache
export GONOSUMDB="${module%/*}"
export GOFLAGS="$($GO env GOFLAGS) -mod=mod -modcacherw"
export GOBIN=$tmp/bin

# step runs a user's command, printing it, and its output only if it fails.
step() {
	echo "\$ $*"
	local out
	if ! out=$("$@" 2>&1); then
		printf '%s\n' "$out" >&2
		echo "consumer: '$*' failed: a user could not resolve or build the module named above" >&2
		exit 1
	fi
}

# Each module alone, as a user who needs only it gets it: a requirement
# that no other module raises to the release shows here.
echo "== each published module alone"
for m in $published; do
	alone=$tmp/alone/${m//\//_}
	mkdir -p "$alone"
	printf 'module example.com/alone\n\ngo %s\n' "$goversion" >"$alone/go.mod"
	(cd "$alone" && step $GO get "$m@$version")
done

echo "== a user following the docs"
user=$tmp/user
mkdir -p "$user/core" "$user/fx" "$user/observe"
cd "$user"
printf 'module example.com/consumer\n\ngo %s\n' "$goversion" >go.mod

# The install lines, as a user copies them: README's install section, and
# every docs page's, line breaks inside a line's backticks undone.
lines=$({ sed -n '/^## Install/,/^## /p' "$root/README.md"; cat "$root"/docs/*.md; } |
	tr '\n' ' ' | grep -oE "go get([[:space:]]+-tool)?[[:space:]]+$module[^\` ]*" | sed -E 's/[[:space:]]+/ /g' | awk '!seen[$0]++')
if [ -z "$lines" ]; then
	echo "consumer: no 'go get $module...' line found in README.md's install section or docs/" >&2
	exit 1
fi
while read -r line; do
	case $line in *@*) ;; *) line="$line@$version" ;; esac
	# shellcheck disable=SC2086 # the line's words, as a shell splits them
	step $line
done <<<"$lines"

cat >core/main.go <<GO
// Core and every backend, as the README's first program.
package main

import (
	"$module/backends/goredis"
	"$module/backends/memory"
	"$module/backends/redigo"
	"$module/backends/rueidis"
	"$module/backends/valkey"
	"$module/core"
)

func main() {
	_, _, _ = goredis.Dial, redigo.Dial, rueidis.Dial
	_ = valkey.Dial
	locker, err := core.New([]core.Node{memory.New()})
	if err == nil {
		_ = locker.Close()
	}
}
GO
cat >fx/main.go <<GO
// An fx application with the Locker from fxmodule, every driver linked.
package main

import (
	"$module/core"
	"$module/fxmodule"
	_ "$module/fxmodule/goredis"
	_ "$module/fxmodule/redigo"
	_ "$module/fxmodule/rueidis"
	_ "$module/fxmodule/valkey"
	"go.uber.org/fx"
)

func main() {
	fx.New(
		fxmodule.Module,
		fx.Supply(fxmodule.Config{Driver: "goredis", Addrs: []string{"127.0.0.1:6379"}}),
		fx.Invoke(func(*core.Locker) {}),
	)
}
GO
cat >observe/main.go <<GO
// The Prometheus and OpenTelemetry observers.
package main

import (
	"$module/core"
	"$module/middleware/metrics"
	"$module/middleware/tracing"
)

func main() {
	m, err := metrics.New()
	if err != nil {
		panic(err)
	}
	_ = []core.Option{core.WithObserver(m), core.WithObserver(tracing.New())}
}
GO

step $GO mod tidy
step $GO build ./...
# The command as a tool of the user's module: `go install pkg@version`
# refuses a module whose go.mod has replace lines (cmd/quorumlock keeps
# them for work in a checkout), a dependency's replace lines are ignored.
step $GO get -tool "$module/cmd/quorumlock@$version"
step $GO tool quorumlock help

# Every module of this repository in the build at the release version.
wrong=$($GO list -m -f '{{.Path}}@{{.Version}}' all | grep "^$module[@/]" | grep -v "@$version\$" || true)
if [ -n "$wrong" ]; then
	echo "consumer: modules of this repository at a version other than $version:" $wrong >&2
	exit 1
fi
# And no published go.mod requires another version, even one that a
# higher requirement elsewhere hides from the builds above.
modproxy -check
echo "consumer: with no replace, $($GO list -m all | grep -c "^$module") modules of this repository resolve at $version; core and every backend, fx, metrics and tracing build; cmd/quorumlock@$version runs as a tool"
