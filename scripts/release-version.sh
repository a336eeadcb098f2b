#!/usr/bin/env bash
# Prints the release version: the version at which the repository's
# modules require one another (every go.mod under the top directory). It
# is the one place the version lives: scripts/release.sh sets it, and
# scripts that need it (lean-modules.sh) read it here.
#
# Fails, naming the go.mod and the requirement, when a module requires one
# of the project's modules at v0.0.0 or a pseudo-version (a version no
# release tags: Go ignores a dependency's replace lines, so a user's build
# would ask for it and fail), or when two requirements disagree (the
# modules are released together, at one version).
#
# With -list, prints every such requirement as "go.mod path version",
# unchecked (scripts/release.sh sets them from it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
module=$(awk '$1 == "module" { print $2; exit }' go.mod)

# Every requirement of a project module: "file path version", from
# single-line requires and require blocks alike.
reqs=$(find . -name go.mod -not -path './.git/*' -not -path '*/testdata/*' | sort | while read -r f; do
	awk -v f="${f#./}" -v m="$module" '
		/^require[ \t]*\(/ { block = 1; next }
		block && /^\)/ { block = 0; next }
		{ line = $0; sub(/\/\/.*/, "", line); n = split(line, w) }
		block && n >= 2 { p = w[1]; v = w[2] }
		!block && n >= 3 && w[1] == "require" { p = w[2]; v = w[3] }
		p == m || index(p, m "/") == 1 { print f, p, v }
		{ p = "" }
	' "$f"
done)
if [ "${1:-}" = -list ]; then
	[ -z "$reqs" ] || printf '%s\n' "$reqs"
	exit 0
fi

# v0.0.0, and pseudo-versions (vX.Y.Z-[pre.]yyyymmddhhmmss-commit).
bad=$(printf '%s\n' "$reqs" | grep -E ' (v0\.0\.0|v[0-9]+\.[0-9]+\.[0-9]+-([^ ]*\.)?[0-9]{14}-[0-9a-f]{12})$' || true)
if [ -n "$bad" ]; then
	printf '%s\n' "$bad" | awk '{ printf "%s: requires %s at %s, a version no release tags\n", $1, $2, $3 }' >&2
	echo "set the release version with: make release VERSION=vX.Y.Z" >&2
	exit 1
fi
versions=$(printf '%s\n' "$reqs" | awk 'NF == 3 { print $3 }' | sort -u)
if [ "$(printf '%s\n' "$versions" | grep -c .)" -ne 1 ]; then
	echo "the modules require one another at different versions (want one release version):" >&2
	printf '%s\n' "$reqs" | sed 's/^/    /' >&2
	exit 1
fi
echo "$versions"
