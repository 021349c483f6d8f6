#!/usr/bin/env bash
# The run command: set everything up on SQLite and start the console
# (gunicorn) and the scheduler together. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py collectstatic --noinput --verbosity 0
.venv/bin/python manage.py bootstrap

BIND=${BIND:-127.0.0.1:8000}
.venv/bin/gunicorn config.wsgi --bind "$BIND" --workers "${WEB_WORKERS:-2}" --access-logfile - &
web=$!
.venv/bin/python manage.py runscheduler &
scheduler=$!

stop() {
  trap - INT TERM
  kill -TERM "$web" "$scheduler" 2>/dev/null || true
  wait "$web" "$scheduler" 2>/dev/null || true
  exit 0
}
trap stop INT TERM
echo "Cronboard console on http://$BIND/ — Ctrl-C stops the console and the scheduler."
# If either process dies on its own, stop the other and report it.
wait -n "$web" "$scheduler" || true
echo "a Cronboard process exited; stopping the other" >&2
stop
