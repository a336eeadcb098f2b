#!/usr/bin/env bash
# Makes sure redis-server is available for the tests: installs Debian's
# redis-server package when it is missing and this machine can, and
# otherwise stops with a clear message. Tests start their own servers on
# free ports; nothing here starts or relies on a system service.
set -euo pipefail

if [ -n "${QUORUMLOCK_REDIS_SERVER:-}" ]; then
  if [ -x "$QUORUMLOCK_REDIS_SERVER" ]; then exit 0; fi
  echo "ensure-redis: QUORUMLOCK_REDIS_SERVER=$QUORUMLOCK_REDIS_SERVER is not an executable" >&2
  exit 1
fi
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: redis-server is not installed and apt-get is not available." >&2
  echo "ensure-redis: install Redis 7 (redis-server and redis-cli on PATH), or set QUORUMLOCK_REDIS_SERVER." >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    echo "ensure-redis: redis-server is not installed, and installing it needs root (or passwordless sudo)." >&2
    echo "ensure-redis: run: sudo apt-get update && sudo apt-get install -y redis-server redis-tools" >&2
    exit 1
  fi
fi

echo "ensure-redis: installing redis-server and redis-tools from Debian's packages..."
export DEBIAN_FRONTEND=noninteractive
# The package may start a system service on 6379 where systemd runs; the
# tests never use it.
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
command -v redis-server >/dev/null 2>&1 || { echo "ensure-redis: installation failed" >&2; exit 1; }
redis-server --version
