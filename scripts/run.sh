#!/usr/bin/env bash
# Start the web server and the task worker together; Ctrl+C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

python=.venv/bin/python
port=${PORT:-8000}

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "run.sh: something already answers on 127.0.0.1:$port; stop it, or choose another port: make run PORT=8001" >&2
  exit 1
fi

"$python" manage.py migrate --noinput --verbosity 0
"$python" manage.py collectstatic --noinput --verbosity 0

# Job control puts each child in its own process group: a Ctrl+C reaches only
# this script, which asks each child to stop (qcluster then stops its workers,
# runserver its reloaded server) and, if a group lingers, ends it.
set -m
children=()

stop_children() {
  trap - INT TERM EXIT
  local pid
  for pid in "${children[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${children[@]}"; do
    for _ in $(seq 100); do
      kill -0 -- "-$pid" 2>/dev/null || continue 2
      sleep 0.1
    done
    echo "run.sh: process group $pid did not stop within 10 s; killing it" >&2
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap stop_children EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$python" manage.py qcluster &
children+=($!)
"$python" manage.py runserver "127.0.0.1:$port" &
children+=($!)

# Say where to go once the server answers, below the start-up chatter.
for _ in $(seq 100); do
  kill -0 "${children[1]}" 2>/dev/null || break
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    printf '\n  evalsite is running at http://127.0.0.1:%s/\n' "$port"
    printf '  (web server and task worker; press Ctrl+C to stop both)\n\n'
    break
  fi
  sleep 0.1
done

# Whichever stops first (a port already in use, say) takes the other with it.
wait -n
