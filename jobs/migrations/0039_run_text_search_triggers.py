"""SQLite only: migration 0037 changed the runs table in ways SQLite
cannot alter in place (a foreign key added among its columns), so Django
rebuilt the table, and a rebuilt table loses its triggers: the FTS5 index
of 0029 stopped following new runs. The triggers are made again, and the
index refilled from the runs as they are now."""

import importlib

from django.db import migrations

text_search = importlib.import_module("jobs.migrations.0029_run_text_search")
TRIGGERS = [statement for statement in text_search.SQLITE_FORWARD if statement.startswith("CREATE TRIGGER")]
REFILL = [
    "INSERT INTO jobs_run_fts(jobs_run_fts) VALUES ('delete-all')",
    *[
        statement
        for statement in text_search.SQLITE_FORWARD
        if statement.startswith("INSERT INTO jobs_run_fts(rowid")
    ],
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in [*text_search.SQLITE_BACKWARD[:3], *TRIGGERS, *REFILL]:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0038_manual_run_waiting")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
