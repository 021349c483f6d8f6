#!/usr/bin/env bash
# The run command: set everything up on SQLite and start the console
# (gunicorn) and the scheduler together. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

mkdir -p var  # the SQLite database and the secret key file live here
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py collectstatic --noinput --verbosity 0
.venv/bin/python manage.py compilecatalogs --verbosity 0  # locale/*.po → .mo (polib: no msgfmt needed)
.venv/bin/python manage.py bootstrap

BIND=${BIND:-127.0.0.1:8000}
# Links in alerts point at CRONBOARD_BASE_URL: unless it is set (here or in
# .env), it is where this console listens.
source scripts/base_url.sh
if ! base_url_is_set .env; then
  derived=$(base_url_for_bind "$BIND")
  [ -z "$derived" ] || export CRONBOARD_BASE_URL="$derived"
fi
# gunicorn.conf.py (read from this directory) holds the rest of its settings.
.venv/bin/gunicorn config.wsgi --bind "$BIND" --workers "${WEB_WORKERS:-2}" --access-logfile - &
web=$!
.venv/bin/python manage.py runscheduler &
scheduler=$!

# Ctrl-C (or SIGTERM) reaches this script and, from a terminal, both processes
# too; they then exit with status 0. Only a process that fails (a non-zero
# status: a crash, a refused start, kill -9) is reported as having died.
stopping=""
trap 'stopping=1' INT TERM
echo "Cronboard console on $BIND (links in alerts: ${CRONBOARD_BASE_URL:-CRONBOARD_BASE_URL from .env or its default}) — Ctrl-C stops the console and the scheduler."
status=0
wait -n "$web" "$scheduler" || status=$?
trap - INT TERM
rc=0
if [ -z "$stopping" ] && [ "$status" -ne 0 ]; then
  if kill -0 "$web" 2>/dev/null; then which="the scheduler"; else which="the console (gunicorn)"; fi
  echo "$which died (exit status $status); stopping the other" >&2
  rc=1
fi
kill -TERM "$web" "$scheduler" 2>/dev/null || true
wait "$web" "$scheduler" 2>/dev/null || true
exit "$rc"
