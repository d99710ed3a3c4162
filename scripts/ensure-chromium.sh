#!/bin/sh
# Installs Debian's Chromium for the browser tests (tests/e2e) when it is missing.
# Uses sudo only when not already root.
set -eu
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: /usr/bin/chromium is missing and apt-get is not available; the browser tests will be skipped" >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=""
else
  as_root="sudo"
fi
echo "ensure-chromium: installing Debian's chromium package for the browser tests" >&2
$as_root apt-get update
DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y --no-install-recommends chromium
