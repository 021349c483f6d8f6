"""Audit rows about secrets get a subject of their own ("secrets") and every
row not about a job the name of what it is about (`subject_name`: the
secret, the role's holder). The rows written before held a secret as a job
row without a job, named "secret NAME", with the name in their changes."""

from django.db import migrations, models

SECRET_ACTIONS = ("secret-create", "secret-set", "secret-delete")


def name_the_subjects(apps, schema_editor):
    AuditEvent = apps.get_model("jobs", "AuditEvent")
    rows = AuditEvent.objects.filter(job__isnull=True, subject="job", action__in=SECRET_ACTIONS)
    for event in rows.iterator():
        changes = dict(event.changes or {})
        name = changes.pop("secret", None) or event.job_name.removeprefix("secret ")
        AuditEvent.objects.filter(pk=event.pk).update(
            subject="secrets", subject_name=name[:200], job_name="", changes=changes
        )
    for event in AuditEvent.objects.filter(subject="roles").iterator():
        holder = (event.changes or {}).get("holder")
        if isinstance(holder, str):
            AuditEvent.objects.filter(pk=event.pk).update(subject_name=holder[:200])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0025_alert_acknowledged"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="subject_name",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="subject",
            field=models.CharField(
                choices=[
                    ("job", "Job"),
                    ("settings", "Settings"),
                    ("channels", "Alert channels"),
                    ("sign-in", "Sign-in"),
                    ("roles", "Roles"),
                    ("secrets", "Secrets"),
                ],
                default="job",
                max_length=10,
            ),
        ),
        migrations.RunPython(name_the_subjects, migrations.RunPython.noop),
    ]
