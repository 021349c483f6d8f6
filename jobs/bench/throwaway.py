"""Throw-away databases.

The parent `manage.py bench …` creates one (a temporary SQLite file, or a new
database on the PostgreSQL server that --database-url names), runs the
benchmark in a child `manage.py bench …` whose DATABASE_URL points at it, and
drops it afterwards. The child checks, before it touches anything, that its
database is the throw-away one the parent made (`ensure_inside`): the
configured database is never opened.
"""

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import environ
from django.conf import settings
from django.core.management.base import CommandError

MARK = "CRONBOARD_BENCH_DATABASE"  # the throw-away database's NAME, for the child
OPTIONS = "CRONBOARD_BENCH_OPTIONS"  # the benchmark's options, as JSON
WORKDIR = "CRONBOARD_BENCH_WORKDIR"  # logs and the SQLite file


@dataclass
class Throwaway:
    url: str
    name: str
    vendor: str  # "sqlite" | "postgresql"
    workdir: Path
    _admin: dict | None = None  # how to reach the PostgreSQL server to drop it

    def drop(self) -> None:
        if self._admin is not None:
            with _admin_connection(self._admin) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        shutil.rmtree(self.workdir, ignore_errors=True)


def create(database_url: str | None) -> Throwaway:
    workdir = Path(tempfile.mkdtemp(prefix="cronboard-bench-"))
    if not database_url:
        path = workdir / "bench.sqlite3"
        return Throwaway(url=f"sqlite:///{path}", name=str(path), vendor="sqlite", workdir=workdir)
    try:
        config = environ.Env.db_url_config(database_url)
    except (ValueError, KeyError) as exc:
        raise CommandError(f"--database-url: {exc}") from exc
    if config["ENGINE"] != "django.db.backends.postgresql":
        raise CommandError(
            "--database-url must be a postgres:// URL (SQLite needs none: a temporary file is used)"
        )
    name = f"cronboard_bench_{secrets.token_hex(4)}"
    with _admin_connection(config) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(database_url)
    url = urlunsplit(parts._replace(path=f"/{name}"))
    return Throwaway(url=url, name=name, vendor="postgresql", workdir=workdir, _admin=config)


def _admin_connection(config: dict):
    import psycopg

    return psycopg.connect(
        host=config.get("HOST") or None,
        port=config.get("PORT") or None,
        user=config.get("USER") or None,
        password=config.get("PASSWORD") or None,
        # The server's maintenance database: CREATE/DROP DATABASE cannot run
        # inside the database they name, and the named one is never written.
        dbname="postgres",
        autocommit=True,
    )


def run_child(db: Throwaway, what: str, options: dict, *, capture: bool = False, env: dict | None = None):
    """Run `manage.py bench <what>` against the throw-away database."""
    child_env = {
        **os.environ,
        **(env or {}),
        "DATABASE_URL": db.url,
        MARK: db.name,
        OPTIONS: json.dumps(options),
        WORKDIR: str(db.workdir),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.run(
        [sys.executable, str(settings.BASE_DIR / "manage.py"), "bench", what],
        cwd=settings.BASE_DIR,
        env=child_env,
        stdout=subprocess.PIPE if capture else None,
        text=True,
        check=False,
    )


def inside() -> bool:
    return MARK in os.environ and OPTIONS in os.environ


def ensure_inside() -> tuple[dict, Path]:
    """In the child: refuse to run unless the default database is the
    throw-away one. Returns the options and the work directory."""
    expected = os.environ[MARK]
    actual = str(settings.DATABASES["default"]["NAME"])
    if actual != expected:
        raise CommandError(
            f"refusing to benchmark: the database is {actual!r}, not the throw-away {expected!r}"
        )
    return json.loads(os.environ[OPTIONS]), Path(os.environ[WORKDIR])
