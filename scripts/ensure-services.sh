#!/bin/sh
# Installs Debian's PostgreSQL and Redis servers for the service tests when their
# binaries are missing. It only installs: the tests start their own throwaway
# instances on 127.0.0.1 (tests/services.py), so no system service is started here.
# Uses sudo only when not already root.
set -eu

packages=""
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  packages="$packages postgresql"
fi
if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then
  packages="$packages redis-server"
fi
[ -n "$packages" ] || exit 0

fail() {
  echo "ensure-services: $1" >&2
  echo "ensure-services: install the packages$packages yourself; the service tests need them." >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "missing$packages and apt-get is not available."
if [ "$(id -u)" -eq 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1; then
  as_root="sudo"
else
  fail "missing$packages; installing needs root, and sudo is not available."
fi

echo "ensure-services: installing Debian's$packages for the service tests" >&2
# Nothing here starts a service. (On a machine with an init system, Debian's own
# postinst may start the system instances on 5432/6379; the tests never use them.)
$as_root apt-get update -qq || fail "apt-get update failed."
# shellcheck disable=SC2086 # $packages is a list of words on purpose
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  -o DPkg::Lock::Timeout=300 $packages >/dev/null || fail "apt-get install$packages failed."
