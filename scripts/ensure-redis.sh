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

# The package may start a system service on 6379 where systemd runs; the
# tests never use it.
"$(dirname "$0")/apt-install.sh" ensure-redis redis-server \
  "install Redis 7 (redis-server and redis-cli on PATH), or set QUORUMLOCK_REDIS_SERVER." \
  redis-server redis-tools
command -v redis-server >/dev/null 2>&1 || { echo "ensure-redis: installation failed" >&2; exit 1; }
redis-server --version
