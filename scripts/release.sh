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
#  4. For each published module with an earlier release (the latest git
#     tag [<dir>/]vX.Y.Z below VERSION, or RELEASE_BASE), runs gorelease
#     against it: an incompatible API change fails a patch release (and,
#     from v1, any release without a new major version); a v0 minor
#     release prints it. gorelease fetches the base through GOPROXY, taken
#     from the environment, and the other modules at VERSION from an
#     on-disk proxy of the tree (internal/tools/cmd/modproxy, when present).
#     No earlier release (v0.1.0): skipped, and said so.
#  5. Prints what changed and the tags to push.
#
# Modules are found, not listed: every go.mod under the top directory.
# UNPUBLISHED names those no tag is made for.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
export GOWORK=off
# Modules that are not published: programs and tools of the repository,
# and whatever lies under internal/ (as modproxy, which serves the rest).
UNPUBLISHED=${UNPUBLISHED:-examples benchmarks internal}
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

modules=$(find . -name go.mod -not -path './.git/*' -not -path '*/testdata/*' -exec dirname {} \; | sed 's|^\./||' | sort)
published=
for m in $modules; do
	skip=
	for u in $UNPUBLISHED; do
		case $m in "$u" | "$u"/*) skip=1 ;; esac
	done
	[ -n "$skip" ] || published="$published $m"
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
	make GO="$GO" test
else
	make GO="$GO" vet versions tidy modules
fi

# base prints the latest tag of module directory $1 below $version.
base() {
	local prefix=
	[ "$1" = . ] || prefix="$1/"
	git tag -l "${prefix}v*" | sed "s|^$prefix||" | { grep -E "$semver" || true; } |
		{ cat; echo "$version"; } | sort -V | sed "/^$version\$/,\$d" | tail -n 1
}

# gorelease runs on a copy of the tree outside git (it refuses a checkout
# with uncommitted changes, and the version edits above are uncommitted)
# and ignores replace lines: it loads the other modules at $version through
# GOPROXY, so an on-disk proxy of the tree at $version (modproxy, when the
# tools module has it) goes first, and no checksum database knows them yet.
snap=
# minor prints vX.Y of version $1.
minor() { [[ $1 =~ ^(v[0-9]+\.[0-9]+)\. ]] && echo "${BASH_REMATCH[1]}"; }
api_check() {
	local m=$1 b=$2
	if [ -z "$snap" ]; then
		snap=$(mktemp -d)
		trap 'rm -rf "$snap"' EXIT
		mkdir "$snap/tree"
		tar -C "$root" --exclude=./.git -cf - . | tar -C "$snap/tree" -xf -
		if [ -d "$root/internal/tools/cmd/modproxy" ]; then
			# From the checkout: modproxy zips the files git would commit
			# (git ls-files), as they are in the working tree, edits included.
			(cd "$root/internal/tools" && $GO run ./cmd/modproxy -root "$root" -version "$version" -out "$snap/proxy")
		else
			echo "release: no internal/tools/cmd/modproxy: the modules at $version must be on GOPROXY" >&2
		fi
	fi
	local proxy=${GOPROXY:-$($GO env GOPROXY)}
	if [ -d "$snap/proxy" ]; then
		# The other modules at $version, not this one: gorelease refuses
		# a version the proxy already has.
		local own mine
		own=$(awk '$1 == "module" { print $2; exit }' "$snap/tree/$m/go.mod")
		mine=$snap/proxy-${m//\//-}
		cp -r "$snap/proxy" "$mine"
		rm -f "$mine/$own/@v/$version".*
		[ ! -f "$mine/$own/@v/list" ] || sed -i "/^$version\$/d" "$mine/$own/@v/list"
		proxy="file://$mine,$proxy"
	fi
	echo "== gorelease $m: $b to $version (GOPROXY=$proxy)"
	(
		cd "$snap/tree/$m"
		# A module cache of its own: the versions served from the tree are
		# not released yet, and must not stay in the user's cache.
		export GOPROXY=$proxy GONOSUMDB="${GONOSUMDB:-$module}" GOFLAGS="-mod=mod -modcacherw" GOMODCACHE="$snap/modcache"
		# As a user gets it: no replace, go.sum with the other modules.
		for r in $(awk -v m="$module" '$1 == "replace" && ($2 == m || index($2, m "/") == 1) { print $2 }' go.mod); do
			$GO mod edit -dropreplace="$r"
		done
		$GO mod tidy
		$GO tool -modfile="$root/internal/tools/go.mod" gorelease -base="$b" -version="$version" | tee "$snap/report"
	)
	# gorelease lets a v0 release break the API; a patch release must not.
	if grep -q '^## incompatible changes' "$snap/report" && [ "$(minor "$b")" = "$(minor "$version")" ]; then
		echo "release: $m: incompatible API changes since $b in a patch release; a v0 module breaks only in a minor release" >&2
		return 1
	fi
}
for m in $published; do
	b=${RELEASE_BASE:-$(base "$m")}
	if [ -z "$b" ]; then
		echo "== gorelease $m: no earlier release tag (git fetch --tags if one exists), skipped"
	else
		api_check "$m" "$b"
	fi
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
