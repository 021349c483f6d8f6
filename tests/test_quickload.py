"""Jobs load without `Model.__init__` (jobs.models.base.QuickLoad): the
instance a query gives is the one Django's own `Model.from_db` builds, field
by field, on both databases; Django builds it itself for a row with
deferred columns and while a listener waits on the model's init signals."""

from django.db.models import Model
from django.db.models.signals import post_init

from jobs.models import Job
from jobs.models.base import _stored_attnames


def django_built(job: Job) -> Job:
    """The job as Django's Model.from_db builds it from the same row."""
    fields = Job._meta.concrete_fields
    values = [getattr(job, field.attname) for field in fields]
    built = Model.from_db.__func__(Job, job._state.db, [f.attname for f in fields], values)
    built.loaded_state = built.__dict__.get("state")
    return built


def state(job: Job) -> dict:
    values = {k: v for k, v in vars(job).items() if k != "_state"}
    return {**values, "_adding": job._state.adding, "_db": job._state.db, "_cache": job._state.fields_cache}


def test_a_loaded_job_is_the_one_django_builds(both_databases, make_job):
    made = make_job(properties={"a": 1})
    job = Job.objects.get(pk=made.pk)
    assert type(job) is Job
    assert state(job) == state(django_built(job))
    assert {k: type(v) for k, v in vars(job).items()} == {
        k: type(v) for k, v in vars(django_built(job)).items()
    }
    assert job.loaded_state == job.state, "Job.from_db's own step still runs"
    job.name = "renamed"
    job.save()
    assert Job.objects.get(pk=made.pk).name == "renamed", "it saves as an update"


def test_every_field_of_a_job_stores_its_value_plainly():
    assert _stored_attnames(Job) == tuple(f.attname for f in Job._meta.concrete_fields)


def test_a_row_with_deferred_columns_is_built_by_django(make_job):
    made = make_job()
    job = Job.objects.only("name").get(pk=made.pk)
    assert job.get_deferred_fields() and job.name == made.name
    assert job.handler == made.handler, "a deferred field still loads when read"


def test_a_listener_on_job_init_still_runs(make_job):
    made = make_job()
    seen = []

    def listen(sender, instance, **kwargs):
        seen.append(instance.pk)

    post_init.connect(listen, sender=Job)
    try:
        job = Job.objects.get(pk=made.pk)
    finally:
        post_init.disconnect(listen, sender=Job)
    assert seen == [job.pk]
