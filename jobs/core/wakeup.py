"""Waking the schedulers when something changed: the web process, a command
or a scheduler that queued runs for the others notifies CHANNEL on
PostgreSQL; each scheduler's listener (jobs.engine.listener) LISTENs to it."""

from django.db import connection, transaction

CHANNEL = "cronboard_jobs"


def wake_schedulers(sender: str = "") -> None:
    """Tell running schedulers that something changed, after commit. On
    PostgreSQL this is a NOTIFY they LISTEN for, its payload the `sender`
    (a scheduler's worker id: its own listener ignores it); on SQLite they
    poll once a second, which is the fallback everywhere."""
    if connection.vendor == "postgresql":

        def _notify():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, sender])

        transaction.on_commit(_notify)
