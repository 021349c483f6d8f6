"""The statement that claims a pass's due fires, and on PostgreSQL the same
statement writing their runs.

`ClaimStatement.terms(plans, now, epoch)` gives the rows and terms of the
claims' batched compare-and-set (`bulk.update_from_values` on the jobs):
each job's row moves only if its next fire time and its version are the
ones its plan read, it is still enabled and not deleted, and, clustered,
while the planner holds the leader lease at `epoch`, judged by the
statement itself (the epoch fence).

`ClaimStatement.write(plans, runs, now, epoch)` sends those claims and the
INSERT of the runs of the fires they won as ONE statement (PostgreSQL, a
data-modifying WITH: `bulk.update_then_insert`): a pass that plans costs
one round trip fewer, and a fire whose claim another node or an edit won
writes no run, as with the two statements in one transaction.
"""

from datetime import datetime

from django.db import connection

from jobs import cluster
from jobs.engine import leases
from jobs.engine.bulk import database, sql_literal, update_then_insert
from jobs.models import Job

MATCH = ("next_fire_at", "version")
ASSIGN = ("next_fire_at", "last_fire_at", "state", "version")


class ClaimStatement:
    def __init__(self, *, worker_id: str, clustered: bool):
        self.worker_id = worker_id
        self.clustered = clustered
        self._fence_compiled: tuple | None = None  # ((connection, epoch), (sql, params)), see _fence

    def terms(self, plans: list, now: datetime, epoch: int | None) -> tuple[list, dict]:
        """The rows `(job id, *MATCH values, *ASSIGN values)` of the claims
        of `plans` (planning's FirePlans) and the keywords of the update."""
        qn = connection.ops.quote_name

        def column(name: str) -> str:
            return f"{qn(Job._meta.db_table)}.{qn(Job._meta.get_field(name).column)}"

        # The state as a literal: bound, SQLite would prepare the statement
        # on every claim (bulk.with_literals).
        where = f"{column('state')} = {sql_literal(Job.State.ENABLED)} AND {column('deleted_at')} IS NULL"
        where_params: list = []
        if self.clustered:
            # The epoch fence, in the claim's own statement (Planner._claimable).
            sql, fence_params = self._fence(epoch, now)
            where += f" AND EXISTS ({sql})"
            where_params += fence_params
        rows = [
            (
                plan.job.pk,
                plan.expected_next,
                plan.job.version,
                plan.new_next,
                plan.last_fire,
                str(Job.State.PAUSED if plan.disable else Job.State.ENABLED),
                # Disabling a run-once job bumps its version, as in `claim_fire`.
                plan.job.version + 1 if plan.disable else plan.job.version,
            )
            for plan in plans
        ]
        return rows, dict(match=MATCH, assign=ASSIGN, where=where, where_params=where_params)

    def write(self, plans: list, runs: list, now: datetime, epoch: int | None) -> tuple[set[int], list]:
        """Claim `plans` and insert those of `runs` (all of theirs) whose
        job's claim moved, in one statement: (the ids of the jobs claimed,
        the runs written, their ids set)."""
        rows, terms = self.terms(plans, now, epoch)
        return update_then_insert(Job, rows, runs, key="job", **terms)

    def _fence(self, epoch: int | None, now: datetime) -> tuple[str, tuple]:
        """The epoch fence's SQL and parameters. On PostgreSQL it judges by
        the database's clock, so it takes no time of ours: compiled once per
        epoch and connection, not on every pass."""
        key = (database(), epoch)
        if self._fence_compiled is not None and self._fence_compiled[0] == key:
            return self._fence_compiled[1]
        compiled = (
            leases.holding(cluster.LEADER, self.worker_id, epoch, now=now)
            .values("pk")
            .query.sql_with_params()
        )
        if key[0].vendor == "postgresql":
            self._fence_compiled = (key, compiled)
        return compiled
