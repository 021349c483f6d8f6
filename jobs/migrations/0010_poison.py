"""Repair JSON that SQLite stored before text no database stores was refused
at input (jobs/text.py): Django writes JSON with `\\u` escapes, so a lone
surrogate or a NUL reached the file, and a page showing it answered 500
(the response cannot be encoded). PostgreSQL never stored them (jsonb
refuses both), so there is nothing to do there. Only rows whose JSON text
holds such an escape are read."""

from django.db import migrations

from jobs.text import find_unstorable, storable_value

# model → its JSON fields a person or program wrote
FIELDS = {
    "Job": ["properties", "alert_emails"],
    "Run": ["properties"],
    "AuditEvent": ["changes"],
    "Setting": ["value"],
    "Alert": ["recipients"],
}


def repair(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    qn = connection.ops.quote_name
    for model_name, fields in FIELDS.items():
        model = apps.get_model("jobs", model_name)
        for name in fields:
            column = qn(model._meta.get_field(name).column)
            # \u0000 and \ud800…\udfff (a coarse LIKE: \ud000… are read and left alone).
            suspects = model.objects.extra(
                where=[f"{column} LIKE %s OR {column} LIKE %s"], params=["%\\u0000%", "%\\ud%"]
            )
            for row in suspects.iterator():
                value = getattr(row, name)
                if find_unstorable(value):
                    model.objects.filter(pk=row.pk).update(**{name: storable_value(value)})


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_alerts")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
