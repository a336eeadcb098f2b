#!/usr/bin/env bash
# apt-install.sh WHO WHAT ALTERNATIVE PACKAGE...: installs Debian's
# PACKAGEs for the ensure-*.sh scripts, as root or through passwordless
# sudo, or stops with a clear message: WHO names the caller, WHAT what is
# missing, ALTERNATIVE what a user without apt-get can do instead.
set -euo pipefail

who=$1 what=$2 alternative=$3
shift 3

if ! command -v apt-get >/dev/null 2>&1; then
  echo "$who: $what is not installed and apt-get is not available." >&2
  echo "$who: $alternative" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    echo "$who: $what is not installed, and installing it needs root (or passwordless sudo)." >&2
    echo "$who: run: sudo apt-get update && sudo apt-get install -y $*" >&2
    exit 1
  fi
fi

echo "$who: installing $* from Debian's packages..."
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
