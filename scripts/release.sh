#!/usr/bin/env bash
# Prepares a release of every module at VERSION, and prints the tags to
# push; it never tags or pushes itself. Usage: scripts/release.sh vX.Y.Z
# (make release VERSION=vX.Y.Z).
#
#  1. Checks VERSION: semver with a v, major 0 or 1 (the module paths
#     carry no /vN suffix).
#  2. Sets every requirement of one project module by another, in every
#     go.mod of the repository, to VERSION (go mod edit -require), and
#     tidies every module, on its own graph (GOWORK=off).
#  3. Runs the checks that must hold before a release: make vet versions
#     tidy modules; with RELEASE_TEST=1, the whole make test instead
#     (about 13 minutes).
#  4. For each published module with an earlier release (a git tag
#     <dir>/vX.Y.Z below VERSION, or RELEASE_BASE), runs gorelease against
#     it: a change that breaks its API without a major version fails.
#     gorelease fetches the base through GOPROXY, taken from the
#     environment (an on-disk proxy: GOPROXY=file:///path).
#  5. Prints what changed and the tags to push.
#
# Modules are found, not listed: every go.mod under the top directory.
# UNPUBLISHED names those no tag is made for.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
export GOWORK=off
# Modules that are not published: programs and tools of the repository.
UNPUBLISHED=${UNPUBLISHED:-examples benchmarks internal/tools}
module=$(awk '$1 == "module" { print $2; exit }' go.mod)

version=${1:-}
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if ! [[ $version =~ $semver ]]; then
	echo "release: VERSION must be a semantic version with a v, e.g. v0.1.0 (got '$version')" >&2
	exit 2
fi
if [ "${BASH_REMATCH[1]}" -ge 2 ]; then
	echo "release: $version needs /v${BASH_REMATCH[1]} in every module path first" >&2
	exit 2
fi

modules=$(find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sed 's|^\./||' | sort)
published=
for m in $modules; do
	case " $UNPUBLISHED " in *" $m "*) ;; *) published="$published $m" ;; esac
done

echo "== release $version: requirements between the modules"
scripts/release-version.sh -list | while read -r file path _; do
	(cd "$(dirname "$file")" && $GO mod edit -require="$path@$version")
done
for m in $modules; do
	echo "== go mod tidy: $m"
	(cd "$m" && $GO mod tidy)
done

echo "== checks"
if [ "${RELEASE_TEST:-}" = 1 ]; then
	make test
else
	make vet versions tidy modules
fi

# base prints the latest tag of module directory $1 below $version.
base() {
	local prefix=
	[ "$1" = . ] || prefix="$1/"
	git tag -l "${prefix}v*" | sed "s|^$prefix||" | { grep -E "$semver" || true; } |
		{ cat; echo "$version"; } | sort -V | sed "/^$version\$/,\$d" | tail -n 1
}
for m in $published; do
	b=${RELEASE_BASE:-$(base "$m")}
	if [ -z "$b" ]; then
		echo "== gorelease $m: no earlier release, skipped"
		continue
	fi
	echo "== gorelease $m: $b to $version (GOPROXY=${GOPROXY:-$($GO env GOPROXY)})"
	# gorelease ignores replace lines: it loads the other modules at
	# $version through GOPROXY too, and no checksum database knows them yet.
	(cd "$m" && GONOSUMDB="${GONOSUMDB:-$module}" GOFLAGS=-mod=mod \
		$GO tool -modfile="$root/internal/tools/go.mod" gorelease -base="$b" -version="$version")
done

changed=$(git status --short)
if [ -n "$changed" ]; then
	echo "== changed: commit these before tagging"
	printf '%s\n' "$changed"
fi
tags=
for m in $published; do
	if [ "$m" = . ]; then tags="$tags $version"; else tags="$tags $m/$version"; fi
done
echo "== tags to push, on the commit that holds these go.mod files (not published:$(printf ' %s' $UNPUBLISHED)):"
printf 'git tag %s\n' $tags
echo "git push origin$(printf ' %s' $tags)"
