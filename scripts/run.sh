#!/usr/bin/env bash
# Start the web server (gunicorn) and the task worker together under scripts/serve.py, which
# migrates, restarts a worker that dies, and stops both on Ctrl+C or when the web server stops.
# `scripts/run.sh --dev` (make dev) serves with Django's development server instead.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/serve.py "$@"
