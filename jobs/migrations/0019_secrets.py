"""Secrets: named values encrypted at rest (jobs.secrets)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0018_workflow_chains"),
    ]

    operations = [
        migrations.CreateModel(
            name="Secret",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True)),
                ("token", models.TextField()),
                ("description", models.CharField(blank=True, max_length=500)),
                ("set_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("set_by", models.CharField(blank=True, max_length=150)),
            ],
            options={
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("name__regex", "^[A-Za-z0-9_.-]{1,100}\\Z")),
                        name="secret_name_valid",
                    )
                ],
            },
        ),
    ]
