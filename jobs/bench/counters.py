"""What `bench scheduler` reads besides the runs table: on PostgreSQL the
server's statements and CPU (`ServerCounters`, `server_figures`), and with
--metrics the engine's step counters grouped as the report shows them
(`STEP_GROUPS`, `step_figures`)."""

import os
from pathlib import Path

from django.db import DatabaseError, connection, transaction


class ServerCounters:
    """PostgreSQL only: the statements the server ran for the throw-away
    database (pg_stat_statements, BEGIN and COMMIT included: one each a
    round trip; None when the server does not load the extension), and the
    CPU time of the server processes serving its connections, read from
    /proc (the server must run on this machine; None otherwise)."""

    def __init__(self):
        self.statements = False
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements'")
            if cursor.fetchone() is None:
                return
            try:
                with transaction.atomic():
                    cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                    cursor.execute("SELECT count(*) FROM pg_stat_statements")
                self.statements = True
            except DatabaseError:
                pass  # not in shared_preload_libraries

    def read(self) -> dict | None:
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            calls = None
            if self.statements:
                # Less the foreign-key checks: Django's constraints are
                # deferred, so the server runs them at COMMIT as statements
                # of their own, with no round trip.
                cursor.execute(
                    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query NOT LIKE '%% FOR KEY SHARE OF x'"
                )
                calls = int(cursor.fetchone()[0])
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            pids = [pid for (pid,) in cursor.fetchall()]
        ticks = os.sysconf("SC_CLK_TCK")
        cpu: dict[int, float] = {}
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks
        return {"statements": calls, "cpu": cpu}


def server_figures(before: dict | None, after: dict | None, *, passes: int | None, fires: int) -> dict | None:
    """Round trips per pass and per fire, and the server's CPU per fire, from
    two `ServerCounters.read()`s."""
    if before is None or after is None:
        return None
    statements = None
    if before["statements"] is not None and after["statements"] is not None:
        # Less the two reads' own statements.
        statements = after["statements"] - before["statements"] - 2
    cpu = sum(after["cpu"][pid] - before["cpu"].get(pid, 0.0) for pid in after["cpu"])
    return {
        "round_trips": statements,
        "round_trips_per_pass": None if statements is None or not passes else round(statements / passes, 2),
        "round_trips_per_fire": None if statements is None else round(statements / max(1, fires), 2),
        "server_cpu_ms_per_fire": round(cpu * 1000 / max(1, fires), 3),
    }


# The steps as the report groups them: the engine's step names under each.
STEP_GROUPS = {
    "planning": ("plan_due", "lead", "check_schedules", "rollup", "share"),
    "claim": ("claim_queued", "admit_waiting", "requeue"),
    "hand-off": ("hand_off",),
    "outcome written": ("collect", "enforce_deadlines"),
    "upkeep": ("node_lease", "heartbeat", "sweep", "alert_watch", "send_alerts", "next_wakeup"),
}


def step_figures(
    before: dict, after: dict, cpu_seconds: float, fires: int, *, cpu_counted: bool = True
) -> dict | None:
    """From the step counters at the window's start and end: each group's
    share of the schedulers' CPU, its statements per pass and per fire; the
    CPU outside every step (waiting, reading the children's outcomes,
    metrics, other threads) is the rest. None without --metrics; the CPU
    figures None unless the schedulers counted each step's CPU time
    (`cpu_counted`: --step-cpu, JOBS_METRICS_STEP_CPU), the shares and the
    rest also when the schedulers' CPU time (counted in ticks of 10 ms)
    is none."""
    if not after:
        return None
    whole = cpu_seconds if cpu_counted else 0.0  # what the shares divide

    def delta(step: str, i: int) -> float:
        return after.get(step, [0, 0, 0])[i] - before.get(step, [0, 0, 0])[i]

    passes = delta("claim_queued", 2) or 1
    groups = {}
    for group, steps in STEP_GROUPS.items():
        cpu = sum(delta(step, 0) for step in steps)
        statements = sum(delta(step, 1) for step in steps)
        groups[group] = {
            "cpu_share": round(cpu / whole, 3) if whole else None,
            "cpu_ms_per_fire": round(cpu * 1000 / max(1, fires), 3) if cpu_counted else None,
            "statements_per_pass": round(statements / passes, 2),
        }
    in_steps = sum(delta(step, 0) for steps in STEP_GROUPS.values() for step in steps)
    statements = sum(delta(step, 1) for steps in STEP_GROUPS.values() for step in steps)
    groups["rest"] = {
        "cpu_share": round(1 - in_steps / whole, 3) if whole else None,
        "cpu_ms_per_fire": round((whole - in_steps) * 1000 / max(1, fires), 3) if whole else None,
        "statements_per_pass": None,
    }
    return {
        "passes": int(passes),
        "statements_per_pass": round(statements / passes, 2),
        "statements_per_fire": round(statements / max(1, fires), 2),
        "groups": groups,
    }
