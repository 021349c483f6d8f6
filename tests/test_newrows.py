"""The runs planning builds without `Model.__init__` (jobs.engine.newrows),
checked against what `Run(...)` gives, field by field: in memory and as
written to the database, on both databases. A field added to runs with a
default is compared here without a change to the test."""

import uuid
from datetime import timedelta

import pytest
from django.db.models.signals import post_init

from jobs.engine import newrows
from jobs.engine.bulk import insert_rows
from jobs.engine.planning import Planner
from jobs.models import Job, Run
from tests.fixtures.core import T0

FIELDS = list(Run._meta.concrete_fields)
# Fields whose default is made anew for each instance (a fresh id, the time
# of the call): equal in kind, not in value, between two instances.
MADE = {field.attname for field in FIELDS if field.has_default() and callable(field.default)}


def _planner() -> Planner:
    return Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(minutes=1), clock=lambda: T0
    )


def _planned_runs(job: Job) -> list[Run]:
    """The runs a fire of `job` due at T0 becomes, as planning builds them."""
    return _planner().plan_fire(job, T0 + timedelta(seconds=1), busy=False).runs


def _orm_twin(run: Run, job: Job) -> Run:
    """The same run built by `Run(...)` from what planning gave explicitly:
    every field whose value differs from its default (the made ones always)."""
    given = {
        field.attname: getattr(run, field.attname)
        for field in FIELDS
        if field.attname in MADE or getattr(run, field.attname) != field.get_default()
    }
    given.pop("job_id", None)
    return Run(job=job, **given)


def _values(run: Run) -> dict:
    return {field.attname: getattr(run, field.attname) for field in FIELDS}


def test_a_new_run_has_every_default_that_run_init_gives(make_job):
    job = make_job(next_fire_at=T0)
    fast = newrows.new(Run, job=job, scheduled_at=T0, trigger=Run.Trigger.SCHEDULE)
    orm = Run(job=job, scheduled_at=T0, trigger=Run.Trigger.SCHEDULE)
    for field in FIELDS:
        got, expected = getattr(fast, field.attname), getattr(orm, field.attname)
        if field.attname in MADE:
            assert type(got) is type(expected), field.attname
        else:
            assert got == expected and type(got) is type(expected), field.attname
    assert fast.job is job and fast._state.fields_cache["job"] is job
    assert fast._state.adding and fast._state.db is None and fast.pk is None
    assert fast.fire_id != orm.fire_id, "a callable default is called for each instance"
    assert fast.properties == {} and fast.properties is not newrows.new(Run, job=job).properties


def test_a_field_the_call_names_is_not_given_its_default(make_job):
    job = make_job()
    fire_id = uuid.uuid4()
    run = newrows.new(Run, job_id=job.pk, fire_id=fire_id, run_after=T0, created_at=T0, properties={"a": 1})
    assert (run.job_id, run.fire_id, run.run_after, run.created_at) == (job.pk, fire_id, T0, T0)
    assert run.properties == {"a": 1}
    assert newrows.new(Run, job=None).job_id is None
    with pytest.raises(TypeError, match="no_such_field"):
        newrows.new(Run, no_such_field=1)


@pytest.mark.parametrize("kind", ["fire", "misfire", "shards"])
def test_a_planned_run_is_the_run_the_orm_builds_field_by_field(both_databases, make_job, kind):
    """Planning's runs (a fire, a skipped misfire, a sharded fire's pieces)
    against `Run(...)` with the values planning set: equal in memory and
    once written, the fast INSERT beside the ORM's own save."""
    options = {"next_fire_at": T0, "max_retries": 2, "timeout_seconds": 30}
    if kind == "misfire":
        options["next_fire_at"] = T0 - timedelta(hours=1)
        options["misfire_policy"] = Job.MisfirePolicy.SKIP
    if kind == "shards":
        options["shards"] = 3
    job = make_job(**options)
    runs = _planned_runs(job)
    assert runs
    twins = [_orm_twin(run, job) for run in runs]
    for run, twin in zip(runs, twins, strict=True):
        assert _values(run) == _values(twin)
    insert_rows(runs)
    stored = [_values(Run.objects.get(pk=run.pk)) for run in runs]
    Run.objects.filter(pk__in=[run.pk for run in runs]).delete()  # the twins take their places
    for twin in twins:
        twin.save()
    for got, twin in zip(stored, twins, strict=True):
        expected = _values(Run.objects.get(pk=twin.pk))
        assert got.pop("id") != expected.pop("id")
        assert got == expected


def test_a_listener_on_run_init_still_runs(make_job):
    job = make_job()
    seen = []

    def listen(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(listen, sender=Run)
    try:
        run = newrows.new(Run, job=job, scheduled_at=T0)
    finally:
        post_init.disconnect(listen, sender=Run)
    assert seen == [run]
