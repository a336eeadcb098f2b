#!/usr/bin/env bash
# Makes sure libfaketime is available for the safety envelope (the tests
# and cmd/envelope of conformance/safety run a redis-server with a fast
# clock through it): installs Debian's faketime package, which brings
# libfaketime, when it is missing and this machine can, and otherwise stops
# with a clear message. QUORUMLOCK_LIBFAKETIME names the library elsewhere.
set -euo pipefail

if [ -n "${QUORUMLOCK_LIBFAKETIME:-}" ]; then
  if [ -r "$QUORUMLOCK_LIBFAKETIME" ]; then exit 0; fi
  echo "ensure-faketime: QUORUMLOCK_LIBFAKETIME=$QUORUMLOCK_LIBFAKETIME is not a readable file" >&2
  exit 1
fi
# A faketime'd redis-server also preloads glibc's libc_malloc_debug.so.0
# (libc6 2.34 or later; see conformance/safety's FaketimeEnv).
if ! compgen -G '/lib/*/libc_malloc_debug.so.0' >/dev/null && ! compgen -G '/usr/lib/*/libc_malloc_debug.so.0' >/dev/null &&
  [ ! -r /lib64/libc_malloc_debug.so.0 ] && [ ! -r /usr/lib64/libc_malloc_debug.so.0 ]; then
  echo "ensure-faketime: glibc's libc_malloc_debug.so.0 is missing (it comes with glibc 2.34 or later)." >&2
  exit 1
fi
# The paths conformance/safety looks in (faketime.go's libfaketimeGlobs).
have_libfaketime() {
  compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null || [ -r /usr/lib/faketime/libfaketime.so.1 ] ||
    [ -r /usr/local/lib/faketime/libfaketime.so.1 ]
}
if have_libfaketime; then
  exit 0
fi

"$(dirname "$0")/apt-install.sh" ensure-faketime libfaketime \
  "install libfaketime 0.9.10 or later, or set QUORUMLOCK_LIBFAKETIME to libfaketime.so.1." \
  faketime
have_libfaketime || { echo "ensure-faketime: installation failed" >&2; exit 1; }
