"""Who keeps a role grant: an administrator by hand (every grant so far), or
the sign-ins of a directory or identity provider (jobs.rolemapping)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0021_roles"),
    ]

    operations = [
        migrations.AddField(
            model_name="rolegrant",
            name="source",
            field=models.CharField(
                blank=True,
                choices=[("", "by hand"), ("ldap", "LDAP"), ("oidc", "OpenID Connect")],
                db_default="",
                default="",
                max_length=10,
            ),
        ),
    ]
