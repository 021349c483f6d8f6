"""Runs carry their chain (chain_id, chain_depth: jobs.engine.outcomes), two
more skip reasons (loop, depth), and job names are stored in NFC
(jobs.models.job_name), in `name` and in the names `after` lists."""

import unicodedata

from django.db import migrations, models
from django.db.models import F


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def normalize_names(apps, schema_editor):
    """Every job name and every name in an `after` in NFC. NFC can lengthen a
    name (U+0958 and the other composition exclusions decompose): one longer
    than the column is cut to its length. Where two live jobs' names then
    differ only in normalisation, one keeps the name (the one stored in NFC
    already, else the older) and the other gets " (2)" (or the next free
    number) appended; an `after` naming it follows. Each changed job gets a
    new version and an audit row (via system), as any edit does."""
    Job = apps.get_model("jobs", "Job")
    AuditEvent = apps.get_model("jobs", "AuditEvent")
    max_length = Job._meta.get_field("name").max_length

    def stored(text: str) -> str:
        return _nfc(text)[:max_length]

    jobs = list(Job.objects.order_by("id").only("id", "name", "after", "deleted_at"))
    taken = {job.name for job in jobs if job.deleted_at is None and stored(job.name) == job.name}
    new_names, live_renames = {}, {}
    for job in jobs:
        name = stored(job.name)
        if name == job.name:
            continue
        if job.deleted_at is None:
            candidate, n = name, 2
            while candidate in taken:
                suffix = f" ({n})"
                candidate, n = name[: max_length - len(suffix)] + suffix, n + 1
            taken.add(candidate)
            live_renames[job.name] = name = candidate
        new_names[job.pk] = name
    for job in jobs:
        changes = {}
        name = new_names.get(job.pk, job.name)
        if name != job.name:
            changes["name"] = [job.name, name]
        after = [
            {**item, "job": live_renames.get(item["job"], stored(item["job"]))}
            if isinstance(item, dict) and isinstance(item.get("job"), str)
            else item
            for item in job.after or []
        ]
        if after != (job.after or []):
            changes["after"] = [job.after, after]
        if not changes:
            continue
        Job.objects.filter(pk=job.pk).update(name=name, after=after, version=F("version") + 1)
        AuditEvent.objects.create(job_id=job.pk, job_name=name, action="edit", via="system", changes=changes)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0017_run_fire_id_no_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="chain_depth",
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="chain_id",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="run",
            name="skip_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("misfire", "Misfire"),
                    ("overlap", "Overlap"),
                    ("paused", "Job paused"),
                    ("crashed", "Job crashed"),
                    ("loop", "Loop in its chain"),
                    ("depth", "Chain too deep"),
                ],
                max_length=10,
            ),
        ),
        migrations.RunPython(normalize_names, migrations.RunPython.noop),
    ]
