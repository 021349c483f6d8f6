"""Outcomes the loop took from the pool and has not written yet.

The running loop writes finished runs a batch at a time: an outcome waits
at most COLLECT_WITHIN after the loop took it, so runs ending one by one
share a transaction instead of paying one each. It is written with the time
its run ended (`Outcome.ended_at`: when the loop took it, or when the child
process says it ended), not the time of the write, so the wait changes no
run's end or duration. An outcome whose job fires again
within the wait is written at once (`firing`), so no planner, here or on
another node, finds the run live and skips the fire as an overlap. Steps
that judge whether a run is still live ask first (`Scheduler.settle`,
jobs.engine.loop): a fire of its job due, its deadline, the heartbeat's
cancel requests, the alert watch's long runs; a queued run waiting for a
slot, waiting runs admission may let through, a database error (they are
kept) and shutdown are the loop's (`Scheduler.outcomes_due`, `drain`).
"""

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from jobs.engine.clock import due
from jobs.engine.execution.pool import Flight, Outcome

COLLECT_WITHIN = timedelta(milliseconds=50)


class Pending:
    def __init__(self, within: timedelta = COLLECT_WITHIN):
        self.within = within
        self.outcomes: list[Outcome] = []

    def __bool__(self) -> bool:
        return bool(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def take(self, outcomes: list[Outcome], now: datetime) -> None:
        """Keep outcomes for the next write, each with the time its run ended:
        `now`, or as long before it as the pool says the run ended
        (`Outcome.ended_monotonic`); and, for a run the pool held until its
        time, when it started (`Outcome.started_monotonic`)."""
        monotonic = time.monotonic()

        def on_clock(reading: float) -> datetime:  # a time.monotonic() reading, as `now` is
            return now - timedelta(seconds=max(0.0, monotonic - reading))

        for outcome in outcomes:
            if outcome.ended_at is None:
                outcome.ended_at = on_clock(
                    monotonic if outcome.ended_monotonic is None else outcome.ended_monotonic
                )
            if outcome.started_at is None and outcome.started_monotonic is not None:
                outcome.started_at = on_clock(outcome.started_monotonic)
        self.outcomes.extend(outcomes)

    @property
    def write_by(self) -> datetime | None:
        """When the first waiting outcome has waited long enough; None when none waits."""
        return self.outcomes[0].ended_at + self.within if self.outcomes else None

    def due(self, now: datetime) -> bool:
        """The first has waited long enough (or the clock went back: clock.due)."""
        return bool(self.outcomes) and due(self.outcomes[0].ended_at, now, self.within)

    def firing(self, flights: Mapping[int, Flight], now: datetime) -> bool:
        """Whether an outcome waiting is of a job whose next fire is within the
        wait: then it is written at once, so the planner, here or on another
        node, does not find the run live and skip the fire as an overlap."""
        soon = now + self.within

        def fires_soon(flight: Flight) -> bool:
            job = flight.ctx.job
            return job is not None and job.next_fire_at is not None and job.next_fire_at <= soon

        return self.of(flights, fires_soon)

    def of(self, flights: Mapping[int, Flight], picked: Callable[[Flight], bool]) -> bool:
        """Whether an outcome waiting is of a run (of `flights`) that `picked` picks."""
        return any(o.run_id in flights and picked(flights[o.run_id]) for o in self.outcomes)

    def quiet(self, read_now: bool) -> float:
        """How long the running loop's sleep may leave runs' outcomes unread
        (the pool's `wait(quiet=)`): as long as one waits to be written
        anyway, unless the loop must `read_now`: clustered (a planner on
        another node judges whether a run is live by its row: `firing`), a
        queued run waiting for a slot, or waiting runs admission may let
        through. Each sleep reads what arrived as it ends, each run's end as
        the child process tells it, and a step that needs a run's end reads
        first (the loop's `_settle_jobs`)."""
        return 0.0 if read_now else self.within.total_seconds()

    def written(self) -> None:
        self.outcomes = []
