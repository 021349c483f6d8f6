"""The database's clock, for every process, and what a node lease's info says
of a node's clock. On PostgreSQL several processes compare the times they
write, so they go by the database's clock; on SQLite there is one host and
its clock is the database's. The scheduler keeps its own estimate of the
database's clock (jobs.engine.clock.Clock); a process that keeps none (the
web process, a command) reads it here."""

from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

REFUSE_FACTOR = 10  # times JOBS_MAX_CLOCK_SKEW past which a node stops planning and claiming


def database_now() -> datetime:
    """The database's clock, read now (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


def database_time(now: datetime) -> datetime:
    """The time to judge by for a process that keeps no `Clock` (the web
    process, a command): the database's clock on PostgreSQL, read now,
    the caller's `now` on SQLite."""
    return database_now() if connection.vendor == "postgresql" else now


def write_time(now: datetime | None = None) -> datetime:
    """The time a write from outside the scheduler (the web process, a
    command) goes by: `now` when the caller gives one, else the database's
    clock on PostgreSQL (one query), the process's on SQLite. The scheduler
    nodes judge a run's run_after and a job's next fire by the database's
    clock (jobs.engine.clock), not by this host's."""
    return now or database_time(timezone.now())


def max_skew() -> float:
    """JOBS_MAX_CLOCK_SKEW, in seconds."""
    return float(settings.JOBS_MAX_CLOCK_SKEW)


def skew_in(info: dict | None) -> float | None:
    """The skew a node lease's info records (`Skew.info`), None if none."""
    value = (info or {}).get("clock_skew_seconds")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def refused_in(info: dict | None) -> bool:
    """Whether a node lease's info says the node refuses work (`Skew.info`)."""
    return (info or {}).get("clock_refused") is True


def describe(skew_seconds: float) -> str:
    """'2.5 s ahead of the database's', for logs and the command line."""
    side = "ahead of" if skew_seconds > 0 else "behind"
    return f"{abs(skew_seconds):.3g} s {side} the database's"


def refusal(skew_seconds: float) -> str:
    """Why a node plans and claims nothing, for its log, `manage.py cluster
    status` and the health check."""
    limit = max_skew()
    return (
        f"its clock is {describe(skew_seconds)}: it went more than {REFUSE_FACTOR} x JOBS_MAX_CLOCK_SKEW "
        f"({REFUSE_FACTOR * limit:g} s) off and plans and claims nothing until it is back within "
        f"JOBS_MAX_CLOCK_SKEW ({limit:g} s)"
    )
