from django.db import migrations


def seed(apps, schema_editor):
    Setting = apps.get_model("jobs", "Setting")
    Job = apps.get_model("jobs", "Job")
    Setting.objects.get_or_create(key="sys.job.logRetentionDays", defaults={"value": 30})
    Setting.objects.get_or_create(key="sys.job.alertEmails", defaults={"value": []})
    if not Job.objects.filter(builtin=True, handler="cronboard.retention").exists():
        # next_fire_at stays empty: the scheduler computes it for any enabled
        # job that lacks one when it starts (Scheduler.schedule_unplanned).
        Job.objects.create(
            name="Retention",
            description="Built-in: deletes runs older than sys.job.logRetentionDays, in small batches.",
            kind="python",
            handler="cronboard.retention",
            schedule_type="cron",
            cron_expression="0 30 3 * * ?",
            timezone="UTC",
            timeout_seconds=3600,
            alert_threshold=3,
            builtin=True,
        )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
