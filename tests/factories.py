"""Plain builders for test data (no factory library: a job is a few fields),
and the job form's fields as a browser posts them."""

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


def job_data(**overrides) -> dict:
    """The job form's fields for a valid cron job, as a browser posts them."""
    data = {
        "name": "report",
        "description": "",
        "namespace": "",
        "kind": "python",
        "handler": "demo.echo",
        "properties": "",
        "schedule_type": "cron",
        "cron_expression": "0 30 2 * * *",
        "timezone": "Europe/Berlin",
        "misfire_policy": "skip",
        "max_retries": "0",
        "retry_interval_seconds": "60",
        "timeout_seconds": "600",
        "alert_threshold": "3",
        "alert_emails": "",
        "state": "enabled",
    }
    data.update(overrides)
    return data


def edit_form_data(job: Job, **overrides) -> dict:
    """The job form's fields as the console's edit page posts them for `job`
    (its stored values and version), with `overrides`."""
    data = {
        "name": job.name,
        "description": job.description,
        "namespace": job.namespace,
        "kind": job.kind,
        "handler": job.handler,
        "properties": "",
        "schedule_type": job.schedule_type,
        "cron_expression": job.cron_expression,
        "timezone": job.timezone,
        "misfire_policy": job.misfire_policy,
        "max_retries": str(job.max_retries),
        "retry_interval_seconds": str(job.retry_interval_seconds),
        "timeout_seconds": str(job.timeout_seconds),
        "alert_threshold": str(job.alert_threshold),
        "alert_emails": "",
        "state": job.state,
        "version": str(job.version),
    }
    if job.run_once:
        data["run_once"] = "on"
    data.update(overrides)
    return data
