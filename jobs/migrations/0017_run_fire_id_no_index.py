import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0016_run_partial_fk_indexes"),
    ]

    operations = [
        # By DROP INDEX, as in 0008 and 0016: an AlterField makes SQLite copy
        # the whole runs table. The name is the one Django gave the index
        # (the same on both databases).
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "jobs_run_fire_id_57fc898c"',
                    reverse_sql='CREATE INDEX "jobs_run_fire_id_57fc898c" ON "jobs_run" ("fire_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="fire_id",
                    field=models.UUIDField(default=uuid.uuid4),
                ),
            ],
        ),
    ]
