"""Full-text search over runs' error and log (jobs.runsearch): on SQLite an
FTS5 table that mirrors them (external content, kept by triggers, only for
runs with some text), on PostgreSQL a GIN index on their tsvector (partial
the same way). Existing runs are indexed here."""

from django.db import migrations

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE jobs_run_fts USING fts5(error, log, content='jobs_run', content_rowid='id')",
    """CREATE TRIGGER jobs_run_fts_insert AFTER INSERT ON jobs_run
       WHEN new.error != '' OR new.log != ''
       BEGIN INSERT INTO jobs_run_fts(rowid, error, log) VALUES (new.id, new.error, new.log); END""",
    """CREATE TRIGGER jobs_run_fts_delete AFTER DELETE ON jobs_run
       WHEN old.error != '' OR old.log != ''
       BEGIN INSERT INTO jobs_run_fts(jobs_run_fts, rowid, error, log) VALUES ('delete', old.id, old.error, old.log); END""",
    """CREATE TRIGGER jobs_run_fts_update AFTER UPDATE OF error, log ON jobs_run
       WHEN old.error IS NOT new.error OR old.log IS NOT new.log
       BEGIN
         INSERT INTO jobs_run_fts(jobs_run_fts, rowid, error, log)
           SELECT 'delete', old.id, old.error, old.log WHERE old.error != '' OR old.log != '';
         INSERT INTO jobs_run_fts(rowid, error, log)
           SELECT new.id, new.error, new.log WHERE new.error != '' OR new.log != '';
       END""",
    "INSERT INTO jobs_run_fts(rowid, error, log) SELECT id, error, log FROM jobs_run WHERE error != '' OR log != ''",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS jobs_run_fts_insert",
    "DROP TRIGGER IF EXISTS jobs_run_fts_delete",
    "DROP TRIGGER IF EXISTS jobs_run_fts_update",
    "DROP TABLE IF EXISTS jobs_run_fts",
]
POSTGRES_FORWARD = [
    """CREATE INDEX run_text_search_idx ON jobs_run
       USING GIN (to_tsvector('simple'::regconfig, error || ' ' || log))
       WHERE error <> '' OR log <> ''""",
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS run_text_search_idx"]


def forward(apps, schema_editor):
    statements = SQLITE_FORWARD if schema_editor.connection.vendor == "sqlite" else POSTGRES_FORWARD
    for statement in statements:
        schema_editor.execute(statement)


def backward(apps, schema_editor):
    statements = SQLITE_BACKWARD if schema_editor.connection.vendor == "sqlite" else POSTGRES_BACKWARD
    for statement in statements:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0028_audit_request_id")]

    operations = [migrations.RunPython(forward, backward)]
