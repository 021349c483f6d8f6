#!/bin/sh
# The Docker image's HEALTHCHECK, for both of its containers: a container that
# runs the scheduler is healthy while the scheduler renews its lease
# (`manage.py health`); any other serves the console, checked on /healthz.
set -eu
cd "$(dirname "$0")/.."

if tr '\0' ' ' </proc/1/cmdline | grep -q runscheduler; then
  exec python manage.py health
fi
exec python -c "
import sys, urllib.request
try:
    status = urllib.request.urlopen('http://127.0.0.1:${HEALTHCHECK_PORT:-8000}/healthz', timeout=4).status
except OSError as exc:
    sys.exit(f'unhealthy: /healthz: {exc}')
sys.exit(0 if status == 200 else f'unhealthy: /healthz answered {status}')
"
