"""Plain builders for test data (no factory library: a job is a few fields)."""

from datetime import datetime

from jobs.models import Job


def make_job(*, name: str | None = None, next_fire_at: datetime | None = None, **fields) -> Job:
    """An enabled python job running demo.echo every minute unless told otherwise."""
    make_job.counter += 1
    defaults = dict(
        name=name or f"job-{make_job.counter}",
        kind=Job.Kind.PYTHON,
        handler="demo.echo",
        schedule_type=Job.ScheduleType.CRON,
        cron_expression="0 * * * * *",
        timezone="UTC",
    )
    defaults.update(fields)
    job = Job(**defaults)
    job.next_fire_at = next_fire_at
    job.save()
    return job


make_job.counter = 0
