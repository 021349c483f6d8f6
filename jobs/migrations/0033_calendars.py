"""Working-day calendars: custom calendars (WorkCalendar), a job's
calendar, calendar rule and jitter, the `calendar` alert kind and audit subject."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0032_audit_subjects_pools_and_secrets"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkCalendar",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("description", models.TextField(blank=True)),
                ("base", models.CharField(blank=True, max_length=100)),
                ("non_working", models.JSONField(blank=True, default=list)),
                ("working", models.JSONField(blank=True, default=list)),
                ("version", models.PositiveIntegerField(default=1)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="calendar",
            field=models.CharField(
                blank=True,
                default="",
                help_text="A country code with an optional region (CN, US-CA, DE-BY) or a custom calendar's name.",
                max_length=100,
                verbose_name="Calendar",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="calendar_rule",
            field=models.CharField(
                blank=True,
                choices=[
                    ("working_days", "Working days only"),
                    ("non_working_days", "Non-working days only"),
                    ("skip_holidays", "Skip holidays"),
                ],
                default="working_days",
                max_length=20,
                verbose_name="Fire on",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="jitter_seconds",
            field=models.PositiveIntegerField(
                blank=True,
                default=0,
                help_text="Delay each fire by a stable random amount up to this many seconds (at most 3600).",
                verbose_name="Jitter (seconds)",
            ),
        ),
        migrations.AlterField(
            model_name="alert",
            name="kind",
            field=models.CharField(
                choices=[
                    ("crash", "Crashed"),
                    ("recovered", "Recovered"),
                    ("failed", "Failed"),
                    ("late", "Late"),
                    ("long_running", "Long running"),
                    ("calendar", "Calendar data missing"),
                ],
                max_length=16,
            ),
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
                    ("calendar", "Calendars"),
                ],
                default="job",
                max_length=10,
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(("jitter_seconds__lte", 3600)), name="job_jitter_range"
            ),
        ),
        migrations.AddConstraint(
            model_name="workcalendar",
            constraint=models.UniqueConstraint(models.F("name"), name="workcalendar_unique_name"),
        ),
        migrations.AddConstraint(
            model_name="workcalendar",
            constraint=models.CheckConstraint(
                condition=models.Q(("base", models.F("name")), _negated=True),
                name="workcalendar_not_own_base",
            ),
        ),
    ]
