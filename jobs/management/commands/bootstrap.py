"""First-run set-up: the local secret key file (when SECRET_KEY is not set),
a first superuser (password printed once) and a few demo jobs, each only when
there is none yet. Safe to run on every start."""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.core.management.utils import get_random_secret_key
from django.utils.translation import gettext as _

from jobs import services
from jobs.i18n import activate_for_people_without_a_session
from jobs.models import AuditEvent, Job

DEMO_JOBS = [
    dict(
        name="Demo: echo every minute",
        description="Logs its properties. A harmless first job to watch.",
        handler="demo.echo",
        properties={"greeting": "hello", "team": "ops"},
        schedule_type=Job.ScheduleType.CRON,
        cron_expression="0 * * * * *",
    ),
    dict(
        name="Demo: sleep every minute",
        description="Sleeps 5 s each time; shows running runs and durations.",
        handler="demo.sleep",
        properties={"seconds": "5"},
        schedule_type=Job.ScheduleType.INTERVAL,
        interval_seconds=60,
        timeout_seconds=60,
    ),
    dict(
        name="Demo: weekday report",
        description="Fires at 09:00 New York time on weekdays, when resumed.",
        handler="demo.echo",
        properties={"report": "daily"},
        schedule_type=Job.ScheduleType.CRON,
        cron_expression="0 0 9 ? * MON-FRI",
        timezone="America/New_York",
        state=Job.State.PAUSED,
    ),
    dict(
        name="Demo: always fails",
        description="Fails every time: resume it to see retries, the crash at the threshold and the alert.",
        handler="demo.fail",
        properties={"message": "the demo failure"},
        schedule_type=Job.ScheduleType.INTERVAL,
        interval_seconds=60,
        max_retries=1,
        retry_interval_seconds=5,
        alert_threshold=3,
        state=Job.State.PAUSED,
    ),
]
# Every demo job fires at most once a minute: the demo seeds them through the
# same service and rules (refusals.check_demo_job_fields) as any other door.


class Command(BaseCommand):
    help = "Create a first superuser and demo jobs if there are none."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--no-demo", action="store_true", help="Do not seed demo jobs.")

    def handle(self, *args, username, no_demo, **options):
        activate_for_people_without_a_session()
        if settings.SECRET_KEY_SOURCE != "environment":
            self.write_secret_key(Path(settings.SECRET_KEY_FILE))
        User = get_user_model()
        admin = User.objects.filter(is_superuser=True).order_by("pk").first()
        if admin is None:
            password = secrets.token_urlsafe(12)
            admin = User.objects.create_superuser(username, "", password)
            self.stdout.write(
                self.style.SUCCESS(f"Created superuser '{username}' with password: {password}")
                + "\n(shown once: change it under /admin/ or with `manage.py changepassword`)"
            )
        if no_demo or Job.objects.filter(builtin=False).exists():
            return
        for spec in DEMO_JOBS:
            services.save_job(job=Job(owner=admin, **spec), user=admin, via=AuditEvent.Via.SYSTEM)
        self.stdout.write(_("Seeded {value} demo jobs.").format(value=len(DEMO_JOBS)))

    def write_secret_key(self, path: Path) -> None:
        """The key the web and scheduler processes of this checkout read at
        start (config/settings.py), readable by this user only. An existing
        one is kept: replacing it would sign everyone out."""
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another bootstrap got there first: keep its key
            return
        with os.fdopen(fd, "w") as f:
            f.write(get_random_secret_key())
        self.stdout.write(_("Wrote a new secret key to {path}.").format(path=path))
