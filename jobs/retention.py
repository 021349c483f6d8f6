"""The retention core: deleting finished runs past their retention in short
transactions that leave the scheduler's writes room. The built-in retention
job (jobs.handlers.builtin) runs it; `manage.py bench retention` measures it."""

import time
from contextlib import contextmanager

from django.db import connection, models, transaction

from jobs.models import Run

RETENTION_BATCH = 100  # runs in the first batch; the next ones adapt to BATCH_BUDGET
MIN_BATCH, MAX_BATCH = 10, 2000
# Seconds a batch transaction should hold the write lock. A scheduler write
# that arrives meanwhile waits that long and then some (SQLite's busy handler
# sleeps 1, 2, 5, 10 ms … between tries), and far more than 1 % of them
# arrive meanwhile, so this lands almost whole on the scheduler's p99
# lateness: the budget is chosen with `bench retention` (docs/benchmarks.md).
BATCH_BUDGET = 0.006
PAUSE = 0.02  # seconds between batches, at least
CHECKPOINT_PASSES = 5  # at most, after each batch (see _checkpoint)


def delete_runs_before(
    cutoff,
    *,
    batch: int = RETENTION_BATCH,
    budget: float = BATCH_BUDGET,
    should_stop=lambda: False,
    on_batch=None,
    sleep=time.sleep,
) -> int:
    """Delete finished runs scheduled before `cutoff`, in short transactions
    so no writer waits long on us: `batch` runs first, then as many as fit in
    `budget` seconds (next_batch_size). Returns the number deleted;
    `on_batch(rows, seconds)` hears how long each batch's transaction took.

    After each batch this thread copies the write-ahead log into the database
    (_checkpoint), so the scheduler's next commit does not. Then it pauses
    (twice as long as it held the write lock, at least PAUSE): SQLite has one
    write lock and no queue for it, and a writer that finds it taken retries
    after sleeps that grow to 100 ms, so a cleanup that took the lock back at
    once would starve the scheduler's writes (`bench retention`,
    docs/benchmarks.md)."""
    deleted = 0
    with _checkpoints_between_batches() as checkpoint:
        while not should_stop():
            ids = list(
                Run.objects.filter(scheduled_at__lt=cutoff, status__in=Run.FINISHED)
                .order_by("scheduled_at")
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                break
            count, held = _delete_runs(ids)
            if on_batch is not None:
                on_batch(count, held)
            deleted += count
            checkpoint()
            batch = next_batch_size(batch, held, budget=budget)
            sleep(max(2 * held, PAUSE))
    return deleted


def next_batch_size(size: int, seconds: float, *, budget: float = BATCH_BUDGET) -> int:
    """The next batch's size, given that `size` runs took `seconds`: a batch
    over the budget shrinks the next to what would have fitted, one well
    inside it lets the next grow by a quarter. No fixed size suits every
    database: each run deleted is a write to every index of the runs table,
    and what that costs depends on the table's size, the disk and the load."""
    if seconds > budget:
        size = size * budget / seconds
    elif seconds < 0.7 * budget:
        size = size * 1.25 + 1
    return max(MIN_BATCH, min(MAX_BATCH, int(size)))


@contextmanager
def _checkpoints_between_batches():
    """Yields what to call after each batch: _checkpoint on SQLite; a
    function that does nothing on PostgreSQL, or when the whole cleanup runs
    inside the caller's transaction (tests), where no checkpoint can run.

    Meanwhile this connection's commits stop checkpointing
    (wal_autocheckpoint = 0). Else the commit that takes the log past
    wal_autocheckpoint (1,000 pages, about what one 200-run batch writes:
    every index of the runs table changes per row) copies the log into the
    database and fsyncs it inside COMMIT, and the batch's transaction time
    counts that. The setting is restored after: the worker thread keeps its
    connection for later runs."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield lambda: None
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        (previous,) = cursor.fetchone()
        cursor.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        yield _checkpoint
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA wal_autocheckpoint = {int(previous)}")


def _checkpoint() -> None:
    """Copy SQLite's write-ahead log into the database now, from this thread
    and outside any transaction. Else the scheduler's next commit finds the
    log past wal_autocheckpoint, copies our pages and fsyncs them itself
    while its fires wait (docs/benchmarks.md, "retention").

    A PASSIVE checkpoint never takes the write lock and never waits. One that
    a commit races leaves that commit's pages behind and the database file
    unsynced (SQLite syncs it only once the whole log is copied), so it runs
    again until a pass finds the log fully copied and unchanged since the pass
    before; the next writer then starts the log over from the beginning."""
    previous = None
    with connection.cursor() as cursor:
        for _ in range(CHECKPOINT_PASSES):
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            result = cursor.fetchone()
            busy, frames, copied = result
            if busy or frames == -1:
                return  # another connection is checkpointing, or the database is not in WAL mode
            if frames == copied and result == previous:
                return
            previous = result


def _delete_runs(ids: list[int]) -> tuple[int, float]:
    """One short transaction: (rows deleted, seconds the transaction was open,
    from when it held the write lock to its commit). Rows pointing at the runs
    let go of them (their on_delete is SET_NULL), then one DELETE: no Run
    objects are loaded, which the ORM's delete() would do for every batch
    because of those relations."""
    # Every relation pointing here, hidden ones (related_name="+") included,
    # as the ORM's delete() would look them up.
    relations = [
        f
        for f in Run._meta.get_fields(include_hidden=True)
        if f.auto_created and not f.concrete and (f.one_to_one or f.one_to_many)
    ]
    fast = all(rel.on_delete in (models.SET_NULL, models.DO_NOTHING) for rel in relations)
    with transaction.atomic():
        # On SQLite the transaction begins IMMEDIATE: from here we hold the lock.
        held_from = time.perf_counter()
        if not fast:
            count = Run.objects.filter(id__in=ids).delete()[0]
        else:
            for rel in relations:
                if rel.on_delete is models.SET_NULL:
                    rel.related_model._base_manager.filter(**{f"{rel.field.name}__in": ids}).update(
                        **{rel.field.name: None}
                    )
            placeholders = ", ".join(["%s"] * len(ids))
            with connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {connection.ops.quote_name(Run._meta.db_table)} WHERE id IN ({placeholders})",
                    ids,
                )
                count = cursor.rowcount
    return count, time.perf_counter() - held_from
