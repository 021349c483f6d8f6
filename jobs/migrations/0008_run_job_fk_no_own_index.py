import django.db.models.deletion
from django.db import migrations, models

# The foreign key's own index on jobs_run(job_id) is redundant: run_history_idx
# and run_status_history_idx start with job_id, and every insert and delete of
# a run pays for each index. The index is dropped by name rather than through
# AlterField, which on SQLite would copy the whole runs table.
INDEX = "jobs_run_job_id_f26ec71d"


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0007_api_token"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="job",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="jobs.job",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "jobs_run" ("job_id")',
                ),
            ],
        ),
    ]
