"""The time zone a user reads the console in, and the switch to UTC."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0023_trends"),
    ]

    operations = [
        migrations.AddField(
            model_name="profile",
            name="time_zone",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
        migrations.AddField(
            model_name="profile",
            name="times_in_utc",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
