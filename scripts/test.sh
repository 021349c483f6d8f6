#!/usr/bin/env bash
# The test command: install what the tests need (virtualenv, Python packages,
# Debian's chromium, PostgreSQL server and gettext), check lint and format with ruff
# and the layers with import-linter,
# then run the whole suite. Extra arguments go to pytest; the fast lane for
# day-to-day work is  bash scripts/test.sh -m "not slow and not browser and not postgres"
# (docs/development.md). CI runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# xgettext: tests/test_i18n.py checks the catalogs against the sources.
command -v xgettext >/dev/null 2>&1 || missing+=(gettext)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# python-ldap (django-auth-ldap) builds against OpenLDAP's and SASL's headers;
# tests/fixtures/ldap.py starts a real slapd.
[ -e /usr/include/ldap.h ] || missing+=(libldap2-dev)
[ -e /usr/include/sasl/sasl.h ] || missing+=(libsasl2-dev)
[ -x /usr/sbin/slapd ] || missing+=(slapd)
# prometheus and promtool: tests/test_metrics_process.py scrapes with a real server.
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# --no-compile: pip would compile every file of every package (13 s of a
# fresh install's 31 s here); the modules the tests import are compiled as
# they are first imported instead, and cached (bytecode caches are on, below).
.venv/bin/python -m pip install --quiet --no-compile --disable-pip-version-check -r requirements-dev.txt

# Bytecode caches on, whatever the environment says (some set
# PYTHONDONTWRITEBYTECODE): without them every pytest worker rewrites the
# asserts of every test module again (5 s of CPU each) and every process a
# test starts compiles the project's modules. __pycache__ is in .gitignore.
unset PYTHONDONTWRITEBYTECODE

# The translation catalogs (.po → .mo, with polib: no msgfmt needed).
.venv/bin/python manage.py compilecatalogs --verbosity 0

# Lint and format first: a lint error fails the run before the suite starts.
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
# The layers of jobs/ (pyproject.toml's import-linter contracts).
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache

# One collection first writes those caches, so that the workers, which all
# collect the whole suite at the same moment, find them (their collection
# takes 2 s of CPU each instead of 6). Its errors show in the run below.
.venv/bin/python -m pytest --collect-only -q -p no:xdist "$@" >/dev/null 2>&1 || true

# The suite runs in TEST_WORKERS processes (pytest-xdist), default 6 on any
# machine: most of the slow tests wait on real processes, servers and clocks
# rather than on the CPU, so six keep two cores busy (four left a third of
# them idle). A file's tests stay together in one worker (its module fixtures
# are built once), and the files go out in the order tests/conftest.py gives
# them, the longest first. TEST_WORKERS=0 runs everything in this one process.
workers=${TEST_WORKERS:-6}
parallel=()
[ "$workers" = 0 ] || parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
