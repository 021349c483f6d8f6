"""Writes that change jobs and runs on behalf of a person or a program.

Views, the API and management commands call these; none of them writes a
Job's state or a Run directly. The scheduler's own writes (claiming fires,
recording outcomes) are the engine's (jobs/engine/).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, OperationalError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import admission, audit, config, secrets, workflows
from jobs.core.dbclock import write_time
from jobs.core.wakeup import wake_schedulers
from jobs.models import (
    AuditEvent,
    Job,
    JobDependency,
    Message,
    Run,
    Secret,
)
from jobs.overview import live_manual_runs
from jobs.properties import clean_run_properties
from jobs.refusals import (
    BUSY_MESSAGE,
    STALE_MESSAGE,
    GraphRefused,
    JobCrashed,
    NotRetryable,
    SaveBusy,
    ServiceError,
    StaleJobError,
    check_demo_job_fields,
    check_demo_mode,
    check_job_change,
    demo_job_fields,
    is_lock_conflict,
)

# Code that embeds Cronboard queues tasks with jobs.services.enqueue (docs/handlers.md).
from jobs.tasks import enqueue as enqueue


def save_job(
    *,
    job: Job,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> Job:
    """Save a validated job (see `save_job_if_changed`) and return it."""
    return save_job_if_changed(job=job, user=user, via=via, expected_version=expected_version, now=now)[0]


def save_job_if_changed(
    *,
    job: Job,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    expected_version: int | None = None,
    workflow: dict[str, list[str]] | None = None,
    now: datetime | None = None,
) -> tuple[Job, bool]:
    """Save a validated job: keep its schedule when the schedule did not
    change (Job.mark_saved), reset its failure count, bump its version.
    With `expected_version`, refuse (StaleJobError) when someone else saved it
    in between. The graph's rules are checked again with the graph locked
    (GraphRefused): the form checked them before the transaction began.
    `workflow`: the edges of the jobs saved with this one (an import file,
    see JobForm). A job whose fields all equal the stored ones is not written
    at all (no version bump, no audit row, its next fire kept): returns
    (the stored job, False); else (the saved job, True).

    An edit writes the fields a person sets (Job.EDITABLE_FIELDS) and what
    the save itself decides (version, next fire, failure count), never the
    rest of the row as `job` was loaded: the scheduler writes the same row
    (a claimed fire, an outcome) and an old copy written back would undo
    that. The row is read locked (FOR UPDATE on PostgreSQL; on SQLite the
    transaction holds the write lock from its start), so the next fire is
    decided from the row as it is, and no claim lands between that read
    and the write. `state`, which the scheduler changes too (a crash, a
    run-once job's end), is written by Job.state_after_edit: only where the
    editor changed it, and a crashed job is left only by an edit made with
    its current version.

    A save that loses to another writer over locks (a deadlock, a lock
    waited for past workflows.GRAPH_LOCK_TIMEOUT) writes nothing and
    raises SaveBusy, a StaleJobError: every door answers it as a conflict
    to try again (409 `busy` over the API), never as a server error."""
    now = write_time(now)
    try:
        return _save_job_if_changed(
            job=job, user=user, via=via, expected_version=expected_version, workflow=workflow, now=now
        )
    except OperationalError as exc:
        if is_lock_conflict(exc):
            raise SaveBusy(str(BUSY_MESSAGE)) from exc
        raise


def _save_job_if_changed(*, job, user, via, expected_version, workflow, now) -> tuple[Job, bool]:
    creating = job.pk is None
    with transaction.atomic():
        workflows.lock_graph()
        stored = None if creating else _lock_for_edit(job)
        if stored is not None:
            if stored.is_deleted:
                # Deleted since the editor loaded it: saving would edit a deleted job.
                raise StaleJobError(str(STALE_MESSAGE))
            for name in Job.SCHEDULER_FIELDS:
                setattr(job, name, getattr(stored, name))
            job.state = job.state_after_edit(stored, versioned=expected_version is not None)
        check_job_change(
            kinds=[job.kind, stored.kind if stored else None],
            user=user,
            action="create or edit",
            namespaces=[job.namespace, stored.namespace if stored else None],
        )
        check_demo_job_fields(before=demo_job_fields(stored) if stored else None, after=demo_job_fields(job))
        before = None if creating else audit.snapshot(stored)
        changes = audit.diff(before, audit.snapshot(job))
        if not creating and not changes:
            if expected_version is not None and expected_version != stored.version:
                raise StaleJobError(str(STALE_MESSAGE))
            return stored, False
        # Edges already stored were checked when they were saved, and every
        # save since has seen them: only a new or changed `after` is asked.
        if creating or job.after != stored.after:
            refused = workflows.refusal(
                name=job.name,
                upstreams=[item["job"] for item in job.after or []],
                stored_name=stored.name if stored else None,
                # The file's edges alone: a workflows.Workflow carries the
                # stored graph as read before the lock, and this check is
                # the one that must read it under the lock.
                workflow=getattr(workflow, "file", workflow),
            )
            if refused is not None:
                raise GraphRefused(refused)
            had = {item["job"] for item in (stored.after if stored else None) or []}
            added = {item["job"] for item in job.after or []} - had
            if (refused := workflows.namespace_refusal(user=user, added=added)) is not None:
                raise GraphRefused(refused)
        renamed = stored is not None and stored.name != job.name
        if renamed and (refused := workflows.rename_refusal(user=user, job=stored)) is not None:
            raise GraphRefused(refused, field="name")
        if creating and job.owner_id is None and getattr(user, "pk", None):
            job.owner = user
        if job.pk is not None and expected_version is not None:
            bumped = Job.objects.filter(pk=job.pk, version=expected_version, deleted_at__isnull=True).update(
                version=F("version") + 1
            )
            if not bumped:
                raise StaleJobError(str(STALE_MESSAGE))
            job.version = expected_version + 1
        elif job.pk is not None:
            job.version = F("version") + 1
        if job.state == Job.State.CRASHED:
            # Saving a crashed job is an admin's deliberate change: it stays
            # crashed until re-enabled, but its count starts over.
            job.consecutive_failures = 0
            job.updated_at = now
        else:
            job.mark_saved(now, before=stored)
        job.save(update_fields=None if creating else EDIT_WRITES)
        job.refresh_from_db(fields=["version"])
        job.loaded_state = job.state
        audit.record(job=job, action="create" if creating else "edit", user=user, via=via, changes=changes)
        save_dependencies(
            job,
            renamed_from=stored.name if stored and stored.name != job.name else None,
            user=user,
            via=via,
            now=now,
        )
        wake_schedulers()
    return job, True


def _lock_for_edit(job: Job) -> Job:
    """The job's row as stored, locked for the edit. FOR NO KEY UPDATE: an
    edit changes no key, so it does not wait for (nor block) the KEY SHARE
    lock each new run of the job takes on it. A rename also rewrites the
    `after` of the jobs that run after it (save_dependencies): their rows are
    locked in the same statement, in the order of their ids, so that the
    save never holds one of them while waiting for another that the
    scheduler (which claims fires of many jobs in one statement) holds.
    Under the graph lock the stored name and the downstream links cannot
    change, so the unlocked look at the name is the one the save sees."""
    renaming = Job.objects.filter(pk=job.pk).exclude(name=job.name).exists()
    rows = Job.objects.filter(pk=job.pk)
    if renaming:
        rows = Job.objects.filter(
            Q(pk=job.pk) | Q(pk__in=JobDependency.objects.filter(upstream_id=job.pk).values("downstream_id"))
        )
    locked = {row.pk: row for row in rows.order_by("pk").select_for_update(no_key=True)}
    if job.pk not in locked:
        raise Job.DoesNotExist
    return locked[job.pk]


# What an edit writes on an existing job's row (see save_job_if_changed).
EDIT_WRITES = [*Job.EDITABLE_FIELDS, "version", "updated_at", "next_fire_at", "consecutive_failures"]


def save_dependencies(
    job: Job,
    *,
    renamed_from: str | None = None,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    now: datetime | None = None,
) -> None:
    """Write the JobDependency rows the scheduler follows from `job.after`
    (checked by jobs.workflows: live upstreams, no loop, the limits), and,
    when the job was renamed, rewrite the `after` of the jobs that run after
    it to the new name: each such job is changed like any edit, with a new
    version and an audit row of its own (by whoever renamed its upstream)."""
    wanted = {item["job"]: item["on"] for item in job.after or []}
    upstreams = {j.name: j for j in Job.objects.named(*wanted).exclude(pk=job.pk)}
    JobDependency.objects.filter(downstream=job).exclude(
        upstream__in=[u.pk for u in upstreams.values()]
    ).delete()
    for name, upstream in upstreams.items():
        JobDependency.objects.update_or_create(
            downstream=job, upstream=upstream, defaults={"on": wanted[name]}
        )
    if renamed_from:
        now = now or timezone.now()
        for downstream in Job.objects.filter(upstream_links__upstream=job).distinct().order_by("pk"):
            after = [
                {**item, "job": job.name} if item.get("job") == renamed_from else item
                for item in downstream.after or []
            ]
            if after != downstream.after:
                Job.objects.filter(pk=downstream.pk).update(
                    after=after, version=F("version") + 1, updated_at=now
                )
                audit.record(
                    job=downstream,
                    action="edit",
                    user=user,
                    via=via,
                    changes={"after": [downstream.after, after]},
                )


def pause_job(*, job: Job, user=None, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None) -> Job:
    """Pause a job: it stops firing until resumed. A crashed job is refused
    (JobCrashed) and stays crashed: only a re-enable leaves that state. The
    one place that rule lives: the console's single and bulk pause, the API,
    the CLI and JobScope all pause through here."""
    now = now or timezone.now()
    _require_live(job)
    check_job_change(kinds=[job.kind], user=user, action="pause", runs=False, namespaces=[job.namespace])
    with transaction.atomic():
        # Judged on the row as it is: the scheduler may have crashed the job
        # since it was loaded, and only a re-enable leaves `crashed`.
        paused = (
            Job.objects.filter(pk=job.pk)
            .exclude(state=Job.State.CRASHED)
            .update(state=Job.State.PAUSED, next_fire_at=None, updated_at=now, version=F("version") + 1)
        )
        if not paused:
            raise JobCrashed(
                _("“{name}” has crashed: it stays crashed until it is re-enabled.").format(name=job.name)
            )
        audit.record(
            job=job, action="pause", user=user, via=via, changes={"state": [job.state, Job.State.PAUSED]}
        )
    job.refresh_from_db()
    wake_schedulers()
    return job


def resume_job(*, job: Job, user=None, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None) -> Job:
    """Resume a paused job or re-enable a crashed one: its next fire time is
    computed from now and its failure count starts over."""
    now = write_time(now)
    _require_live(job)
    if job.state == Job.State.PAUSED:
        check_demo_mode("resuming a paused job")
    check_job_change(
        kinds=[job.kind],
        user=user,
        action="re-enable" if job.state == Job.State.CRASHED else "resume",
        namespaces=[job.namespace],
    )
    previous = job.state
    job.state = Job.State.ENABLED
    job.mark_saved(now)
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(
            state=job.state,
            next_fire_at=job.next_fire_at,
            consecutive_failures=0,
            updated_at=now,
            version=F("version") + 1,
        )
        action = "re-enable" if previous == Job.State.CRASHED else "resume"
        audit.record(
            job=job, action=action, user=user, via=via, changes={"state": [previous, Job.State.ENABLED]}
        )
    job.refresh_from_db()
    wake_schedulers()
    return job


def delete_job(*, job: Job, user=None, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None) -> Job:
    """Soft delete: the job disappears from lists and stops firing; its runs
    stay (retention removes them in time); queued runs are cancelled."""
    now = now or timezone.now()
    if job.builtin:
        raise ServiceError(_("Built-in jobs cannot be deleted; pause them instead."))
    check_job_change(kinds=[job.kind], user=user, action="delete", runs=False, namespaces=[job.namespace])
    with transaction.atomic():
        Job.objects.filter(pk=job.pk, deleted_at__isnull=True).update(
            deleted_at=now, next_fire_at=None, updated_at=now, version=F("version") + 1
        )
        Run.objects.filter(job=job, status__in=Run.NOT_STARTED).update(
            status=Run.Status.CANCELLED, finished_at=now, error="job deleted"
        )
        Run.objects.filter(job=job, status=Run.Status.RUNNING).update(cancel_requested=True)
        audit.record(job=job, action="delete", user=user, via=via)
    job.refresh_from_db()
    wake_schedulers()
    return job


def save_settings(*, values: dict, user=None, via: str = AuditEvent.Via.CONSOLE) -> dict:
    """Store the config centre's values (each validated by jobs.config, all
    or none) and audit what changed (audit.record_settings: the global alert
    channels masked, in a row of their own). Refused in demo mode. Returns
    {key: [old, new]} of the changed keys."""
    check_demo_mode("changing settings")
    changes = {}
    with transaction.atomic():
        for key, value in values.items():
            old = config.get_setting(key)
            new = config.set_setting(key, value, user=user)
            if old != new:
                changes[key] = [old, new]
        audit.record_settings(changes=changes, user=user, via=via)
    return changes


def mark_messages_read(*, user, message_id: int | None = None, now: datetime | None = None) -> int:
    """Mark `user`'s unread messages read, or only message `message_id` of
    theirs; another user's message is never touched. Returns how many."""
    unread = Message.objects.filter(user=user, read_at__isnull=True)
    if message_id is not None:
        unread = unread.filter(pk=message_id)
    return unread.update(read_at=now or timezone.now())


def clone_name(name: str) -> str:
    """The name a copy of job `name` gets: "nightly (copy)", or "(copy 2)",
    …, a name no live job has, within the field's length."""
    taken = set(Job.objects.live().filter(name__startswith=f"{name} (copy").values_list("name", flat=True))
    candidate, n = f"{name} (copy)", 1
    while candidate in taken:
        n += 1
        candidate = f"{name} (copy {n})"
    return candidate[: Job._meta.get_field("name").max_length]


@dataclass
class BulkOutcome:
    """What an action over many jobs did to each of them: `done`; `skipped`,
    left as they are by the action's own rule (a crashed job is not paused,
    a job whose manual run is queued or running is not queued again);
    `unchanged`, already as asked (paused, enabled); `refused`, with the
    reason (demo mode, a job this user may not change, a built-in job that
    cannot be deleted), while the rest go ahead."""

    done: list[Job] = field(default_factory=list)
    skipped: list[Job] = field(default_factory=list)
    unchanged: list[Job] = field(default_factory=list)
    refused: list[tuple[Job, str]] = field(default_factory=list)


def _each(jobs: Iterable[Job], step) -> BulkOutcome:
    """`step(job)` for each job, each on its own: it answers which list the
    job goes in; a ServiceError refuses that job only."""
    outcome = BulkOutcome()
    for job in jobs:
        try:
            getattr(outcome, step(job)).append(job)
        except ServiceError as exc:
            outcome.refused.append((job, str(exc)))
    return outcome


def pause_jobs(*, jobs: Iterable[Job], user=None, via: str = AuditEvent.Via.CONSOLE) -> BulkOutcome:
    """pause_job for each job not paused yet; a crashed one is skipped (it
    stays crashed, pause_job's rule)."""

    def pause(job: Job) -> str:
        if job.state == Job.State.PAUSED:
            return "unchanged"
        try:
            pause_job(job=job, user=user, via=via)
        except JobCrashed:
            return "skipped"
        return "done"

    return _each(jobs, pause)


def resume_jobs(*, jobs: Iterable[Job], user=None, via: str = AuditEvent.Via.CONSOLE) -> BulkOutcome:
    """resume_job for each job not enabled yet (a crashed one is re-enabled)."""

    def resume(job: Job) -> str:
        if job.state == Job.State.ENABLED:
            return "unchanged"
        resume_job(job=job, user=user, via=via)
        return "done"

    return _each(jobs, resume)


def run_jobs(*, jobs: Iterable[Job], user=None, via: str = AuditEvent.Via.CONSOLE) -> BulkOutcome:
    """run_now for each job; one whose manual run is already queued or
    running is skipped."""

    def run(job: Job) -> str:
        _run, created = run_now(job=job, user=user, via=via)
        return "done" if created else "skipped"

    return _each(jobs, run)


def delete_jobs(*, jobs: Iterable[Job], user=None, via: str = AuditEvent.Via.CONSOLE) -> BulkOutcome:
    """delete_job for each job."""

    def delete(job: Job) -> str:
        delete_job(job=job, user=user, via=via)
        return "done"

    return _each(jobs, delete)


def retry_run(*, run: Run, user=None, via: str = AuditEvent.Via.CONSOLE) -> tuple[Run, bool]:
    """Run a finished run's job again, now, as a manual run naming the run
    it retries (run_now). Only a run of a job that ended in Run.RETRYABLE
    (failed, timed out, interrupted, cancelled) is retried (NotRetryable)."""
    if run.job_id is None or run.status not in Run.RETRYABLE:
        raise NotRetryable(
            _("Run {pk} is {get_status_display}: only a failed run of a job can be retried.").format(
                pk=run.pk, get_status_display=run.get_status_display().lower()
            )
        )
    return run_now(job=run.job, user=user, via=via, retry_of=run)


def run_now(
    *,
    job: Job,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    trigger: str = Run.Trigger.MANUAL,
    retry_of: Run | None = None,
    properties=None,
    now: datetime | None = None,
) -> tuple[Run, bool]:
    """Queue a manual run. A job has at most one queued or running manual run
    (a partial unique index): asking again returns that run and False.
    Refused (DemoModeError) in demo mode: the one place that rule lives.
    `retry_of`, a finished run of the job, is named in the audit trail, and
    its property overrides are used again unless `properties` is given.
    `properties`: overrides for this run only (a dict or its JSON text),
    merged over the job's by the executor; validated by
    properties.clean_run_properties (ValidationError) and, since they change what
    runs, allowed only to whoever may edit the job (check_job_change)."""
    check_demo_mode("run now")
    check_job_change(kinds=[], user=user, action="run now", runs=False, namespaces=[job.namespace])
    now = write_time(now)
    _require_live(job)
    # A retry queues again the overrides whoever queued the run chose (an
    # editor, for a credential): the operator changes none and never sees a
    # value (only the run's id travels), so only run now is asked of them.
    reused = properties is None and retry_of is not None
    if reused:
        properties = retry_of.properties or None
    overrides = {}
    if properties not in (None, "", {}):
        if not reused:
            check_job_change(
                kinds=[job.kind], user=user, action="override the properties of", namespaces=[job.namespace]
            )
        overrides = clean_run_properties(job, properties)
        # Overriding a credential changes who the run authenticates as: an editor's change.
        if not reused and any(secrets.is_credential_name(name.lower()) for name in overrides):
            check_job_change(
                kinds=[], user=user, action="override the credentials of", namespaces=[job.namespace]
            )
    # Two requests at once: the database's partial unique index lets one
    # insert; the other returns that run. By the time it looks, that run may
    # have finished already (a short job): then nothing live stands in the
    # way, and it asks again instead of failing.
    for _attempt in range(3):
        existing = _live_manual_run(job)
        if existing is not None:
            return existing, False
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    job=job,
                    scheduled_at=now,
                    run_after=now,
                    trigger=trigger,
                    created_by=user if getattr(user, "pk", None) else None,
                    properties=overrides,
                    status=admission.first_status(job),
                    **job.run_policy(),
                    **(retry_of.piece() if retry_of is not None else {}),
                )
                changes = {"run": [None, run.pk]}
                if retry_of is not None:
                    changes["retry_of"] = [None, retry_of.pk]
                if overrides:
                    changes["properties"] = [None, overrides]
                audit.record(job=job, action="run-now", user=user, via=via, changes=changes)
        except IntegrityError:
            continue
        wake_schedulers()
        return run, True
    existing = _live_manual_run(job)
    if existing is None:
        raise ServiceError(_("Another run of “{name}” was being started; try again.").format(name=job.name))
    return existing, False


def cancel_run(
    *, run: Run, user=None, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None
) -> bool:
    """Cancel a queued run at once; ask the worker to stop a running one (it
    records the outcome). A cancelled one-off task is recorded `failed`."""
    now = now or timezone.now()
    # A one-off task belongs to no namespace: cancelling it is for those granted a role everywhere.
    check_job_change(
        kinds=[],
        user=user,
        action="cancel",
        runs=False,
        namespaces=[run.job.namespace if run.job_id else None],
    )
    if run.status in Run.NOT_STARTED and (run.shard_total > 1 or run.node):
        # A piece of a sharded or broadcast fire: its end may decide the
        # fire's outcome, which the scheduler writes (jobs.engine.shards).
        # Due at once, it is claimed and recorded cancelled, never started.
        done = Run.objects.filter(pk=run.pk, status=run.status).update(cancel_requested=True, run_after=now)
    elif run.status in Run.NOT_STARTED:
        if run.is_task:
            fields = dict(status=Run.Status.FAILED, error="task cancelled")
        else:
            fields = dict(status=Run.Status.CANCELLED, error="cancelled before it started")
        done = Run.objects.filter(pk=run.pk, status=run.status).update(finished_at=now, **fields)
    elif run.status == Run.Status.RUNNING:
        done = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    else:
        return False
    if done and run.job_id:
        audit.record(job=run.job, action="cancel-run", user=user, via=via, changes={"run": [run.pk, None]})
    run.refresh_from_db()
    wake_schedulers()
    return bool(done)


def _require_live(job: Job) -> None:
    if job.is_deleted:
        raise ServiceError(_("This job has been deleted."))


def _live_manual_run(job: Job) -> Run | None:
    return live_manual_runs(job).first()


def set_secret(*, name: str, value: str, user=None, via: str, **fields) -> Secret:
    """Create or replace a secret (jobs.secrets.set_secret: `fields` are its
    description and namespaces); refused in demo mode, which changes
    nothing a run could reach."""
    check_demo_mode("change secrets")
    return secrets.set_secret(name=name, value=value, user=user, via=via, **fields)


def delete_secret(*, name: str, user=None, via: str) -> bool:
    check_demo_mode("change secrets")
    return secrets.delete_secret(name=name, user=user, via=via)
