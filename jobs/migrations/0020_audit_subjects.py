"""Audit rows for what belongs to no job (`subject`: the settings, the
global alert channels, sign-ins), two more doors (`import`, `sso`), and the
index the audit page's keyset pages read."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0019_secrets"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="subject",
            field=models.CharField(
                choices=[
                    ("job", "Job"),
                    ("settings", "Settings"),
                    ("channels", "Alert channels"),
                    ("sign-in", "Sign-in"),
                ],
                default="job",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="job_name",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="via",
            field=models.CharField(
                choices=[
                    ("console", "Console"),
                    ("api", "API"),
                    ("cli", "Command line"),
                    ("import", "Import"),
                    ("sso", "SSO sign-in"),
                    ("system", "System"),
                ],
                default="console",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["-created_at", "-id"], name="audit_created_idx"),
        ),
    ]
