"""Backfill: run a job's past fires again. `plan_backfill` computes the
fires the job's schedule had in a range, by the job's own next-fire function
(Job.next_fire_after, so whatever shapes its schedule shapes these too),
leaving out fires that already have a successful run unless asked;
`start_backfill` writes one waiting run per fire (trigger `backfill`, the
fire as its scheduled time, which its handler sees as ctx.scheduled_at),
which admission lets through `parallel` at a time in fire order
(jobs.admission); `cancel_backfill` cancels what is left of it, as a cancel
from the console cancels each run."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs import audit
from jobs.core.wakeup import wake_schedulers
from jobs.formfields import ErrorListMixin
from jobs.forms import check_instant
from jobs.models import MAX_BACKFILL_FIRES, MAX_BACKFILL_PARALLEL, AuditEvent, Backfill, Job, Run
from jobs.refusals import CodedRefusal, ServiceError, check_demo_mode, check_job_change

# The errors' codes (docs/api.md).
CODE_TOO_MANY_FIRES = "47024"  # the range holds more than MAX_BACKFILL_FIRES fires
CODE_RANGE = "47025"  # the range ends before it starts, or in the future
CODE_PARALLEL = "47026"  # parallel out of 1..MAX_BACKFILL_PARALLEL
CODE_NO_SCHEDULE = "47027"  # the job has no schedule to backfill

INSERT_BATCH = 1000


class BackfillRefused(CodedRefusal):
    """A backfill that is not made; nothing was written."""


@dataclass(frozen=True)
class BackfillPlan:
    fires: list[datetime]  # the fires to run, oldest first
    succeeded: int  # fires left out because they already have a successful run


def fires_between(job: Job, start: datetime, end: datetime) -> list[datetime]:
    """The job's fires in [start, end], oldest first, by its next-fire
    function; refused past MAX_BACKFILL_FIRES (47024)."""
    if job.schedule_type == Job.ScheduleType.NONE:
        raise BackfillRefused(
            _("This job has no schedule: there are no fires to backfill."), code=CODE_NO_SCHEDULE, field="job"
        )
    if job.schedule_type == Job.ScheduleType.INTERVAL:
        at = start  # an interval job's grid, counted from the range's start
    else:
        at = job.next_fire_after(start - timedelta(microseconds=1))
    fires = []
    while at is not None and at <= end:
        fires.append(at)
        if len(fires) > MAX_BACKFILL_FIRES:
            raise BackfillRefused(
                _("The range holds more than {max_fires:,} fires; backfill a shorter range.").format(
                    max_fires=MAX_BACKFILL_FIRES
                ),
                code=CODE_TOO_MANY_FIRES,
                field="range_end",
            )
        at = job.next_fire_after(at, last_fire=at)
    return fires


def check_range(start: datetime, end: datetime, now: datetime) -> None:
    if end < start:
        raise BackfillRefused(_("The range ends before it starts."), code=CODE_RANGE, field="range_end")
    if end > now:
        raise BackfillRefused(
            _("A backfill runs past fires only: the range ends in the future."),
            code=CODE_RANGE,
            field="range_end",
        )


def check_parallel(parallel) -> int:
    if (
        isinstance(parallel, bool)
        or not isinstance(parallel, int)
        or not 1 <= parallel <= MAX_BACKFILL_PARALLEL
    ):
        raise BackfillRefused(
            _("Parallel is a whole number from 1 to {max_parallel}.").format(
                max_parallel=MAX_BACKFILL_PARALLEL
            ),
            code=CODE_PARALLEL,
            field="parallel",
        )
    return parallel


def plan_backfill(
    *, job: Job, start: datetime, end: datetime, include_succeeded: bool = False, now: datetime | None = None
) -> BackfillPlan:
    """What a backfill of `job` over [start, end] would run (nothing written)."""
    check_range(start, end, now or timezone.now())
    fires = fires_between(job, start, end)
    if include_succeeded or not fires:
        return BackfillPlan(fires=fires, succeeded=0)
    done = set(
        Run.objects.filter(
            job=job, status=Run.Status.SUCCEEDED, scheduled_at__gte=fires[0], scheduled_at__lte=fires[-1]
        ).values_list("scheduled_at", flat=True)
    )
    left = [fire for fire in fires if fire not in done]
    return BackfillPlan(fires=left, succeeded=len(fires) - len(left))


def start_backfill(
    *,
    job: Job,
    start: datetime,
    end: datetime,
    parallel: int = 1,
    include_succeeded: bool = False,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    now: datetime | None = None,
) -> Backfill:
    """Write the backfill and one waiting run per fire of plan_backfill, in
    one transaction: a refusal writes nothing."""
    check_demo_mode("backfill")
    check_job_change(kinds=[], user=user, action="backfill", runs=False, namespaces=[job.namespace])
    if job.is_deleted:
        raise ServiceError(_("This job has been deleted."))
    now = now or timezone.now()
    parallel = check_parallel(parallel)
    plan = plan_backfill(job=job, start=start, end=end, include_succeeded=include_succeeded, now=now)
    creator = user if getattr(user, "pk", None) else None
    with transaction.atomic():
        backfill = Backfill.objects.create(
            job=job,
            range_start=start,
            range_end=end,
            parallel=parallel,
            include_succeeded=include_succeeded,
            fires=len(plan.fires),
            created_by=creator,
            created_at=now,
        )
        Run.objects.bulk_create(
            [
                Run(
                    job=job,
                    backfill=backfill,
                    scheduled_at=fire,
                    run_after=now,
                    trigger=Run.Trigger.BACKFILL,
                    status=Run.Status.WAITING,
                    created_by=creator,
                    created_at=now,
                    **job.run_policy(),
                )
                for fire in plan.fires
            ],
            batch_size=INSERT_BATCH,
        )
        audit.record(
            job=job,
            action="backfill",
            user=user,
            via=via,
            changes={
                "backfill": [None, backfill.pk],
                "range": [None, [start.isoformat(), end.isoformat()]],
                "fires": [None, len(plan.fires)],
                "parallel": [None, parallel],
            },
        )
    wake_schedulers()
    return backfill


def cancel_backfill(
    *, backfill: Backfill, user=None, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None
) -> int:
    """Cancel a backfill as a whole: its runs not started are cancelled at
    once, its running ones asked to stop. Returns how many runs it reached."""
    job = backfill.job
    check_job_change(kinds=[], user=user, action="cancel", runs=False, namespaces=[job.namespace])
    now = now or timezone.now()
    with transaction.atomic():
        ended = Run.objects.filter(backfill=backfill, status__in=Run.NOT_STARTED).update(
            status=Run.Status.CANCELLED, finished_at=now, error="backfill cancelled before it started"
        )
        asked = Run.objects.filter(
            backfill=backfill, status=Run.Status.RUNNING, cancel_requested=False
        ).update(cancel_requested=True)
        Backfill.objects.filter(pk=backfill.pk, cancelled_at__isnull=True).update(cancelled_at=now)
        audit.record(
            job=job,
            action="backfill-cancel",
            user=user,
            via=via,
            changes={"backfill": [backfill.pk, None], "runs": [ended + asked, None]},
        )
    backfill.refresh_from_db()
    wake_schedulers()
    return ended + asked


def progress(backfill: Backfill) -> dict:
    """The backfill's runs by status (its first attempts and retries alike)."""
    counts = {status: 0 for status, _label in Run.Status.choices}
    rows = Run.objects.filter(backfill=backfill).values("status").annotate(n=Count("id")).order_by()
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


class BackfillForm(ErrorListMixin, forms.Form):
    """A backfill's request as the console, the API and the command send it."""

    range_start = forms.DateTimeField(label=gettext_lazy("From"))
    range_end = forms.DateTimeField(label=gettext_lazy("To"))
    parallel = forms.IntegerField(required=False, label=gettext_lazy("Runs at once"))
    include_succeeded = forms.BooleanField(
        required=False, label=gettext_lazy("Also fires that already have a successful run")
    )

    def clean_range_start(self):
        return check_instant(self.cleaned_data["range_start"])

    def clean_range_end(self):
        return check_instant(self.cleaned_data["range_end"])

    def clean_parallel(self):
        value = self.cleaned_data.get("parallel")
        try:
            return check_parallel(1 if value is None else value)
        except BackfillRefused as refused:
            raise ValidationError(str(refused), code=refused.code) from None
