"""What this release's stricter rules refuse of what was stored before them:
command jobs the command guard refuses, read-only SQL jobs refused by their
text, jobs whose alert channels have a scheme Cronboard no longer sends to.
The scheduler lists them at its start and the Settings page shows them, one
query per kind however many jobs there are."""

import pytest

from jobs import channels
from jobs.checks import stored_refusals
from jobs.models import AlertChannel, Job, Setting
from tests.fixtures import processes


def stored_before_the_rules(make_job):
    """Written as an older release saved them: straight into the table."""
    for n in range(7):
        make_job(
            name=f"backup-{n}",
            kind=Job.Kind.COMMAND,
            handler="",
            properties={"command": "/bin/true", "env": {"AWS_REGION": "eu-west-1"}},
        )
    make_job(name="plain-command", kind=Job.Kind.COMMAND, handler="", properties={"command": "/bin/true"})
    make_job(name="locks", kind=Job.Kind.SQL, handler="", properties={"sql": "SELECT pg_advisory_lock(1)"})
    make_job(name="reads", kind=Job.Kind.SQL, handler="", properties={"sql": "SELECT 1"})
    AlertChannel.objects.create(name="syslogged", url=channels.encrypt("syslog://"))
    AlertChannel.objects.create(name="hooked", url=channels.encrypt("json://hooks.example.com/x"))
    make_job(name="logs", alert_channels=["syslogged"])
    Setting.objects.create(key="sys.job.alertChannels", value=["syslogged"])


@pytest.fixture
def enabled(settings):
    settings.JOBS_COMMAND_ENABLED = True
    settings.JOBS_COMMAND_ENV_ALLOWED = []
    settings.JOBS_COMMAND_ALLOWED = []
    settings.JOBS_SQL_ENABLED = True
    settings.ALERT_CHANNEL_UNFENCED_SCHEMES = []


@pytest.mark.django_db
def test_what_the_new_rules_refuse_is_listed_by_kind(enabled, make_job, django_assert_max_num_queries):
    stored_before_the_rules(make_job)
    with django_assert_max_num_queries(4):  # one per kind
        found = stored_refusals()
    commands, sql, alerts = found
    assert commands.startswith("7 command job(s) are refused by the command guard"), commands
    assert "backup-0, backup-1, backup-2, backup-3, backup-4, …" in commands
    assert "plain-command" not in commands
    assert "env may not set AWS_REGION: it is not in JOBS_COMMAND_ENV_ALLOWED" in commands
    assert sql.startswith("1 read-only SQL job(s) are refused by their statement's text") and "locks" in sql
    assert "reads" not in sql
    assert alerts.startswith("alert channels with a scheme Cronboard no longer sends to"), alerts
    assert ": syslogged;" in alerts, alerts
    assert "ALERT_CHANNEL_UNFENCED_SCHEMES" in alerts and "hooked" not in alerts


@pytest.mark.django_db
def test_once_the_settings_allow_them_nothing_is_listed(enabled, make_job, settings):
    stored_before_the_rules(make_job)
    settings.JOBS_COMMAND_ENV_ALLOWED = ["AWS_REGION"]
    settings.ALERT_CHANNEL_UNFENCED_SCHEMES = ["syslog"]
    Job.objects.filter(name="locks").update(sql_write=True)
    assert stored_refusals() == []
    settings.JOBS_COMMAND_ENABLED = False  # turned off: refused as a whole, not by the new rules
    settings.JOBS_COMMAND_ENV_ALLOWED = []
    assert stored_refusals() == []


@pytest.mark.django_db
def test_the_settings_page_shows_them(enabled, make_job, staff_client):
    stored_before_the_rules(make_job)
    html = staff_client.get("/settings/").content.decode()
    assert html.count('class="flash error stored-refusal"') == 3, html
    assert "7 command job(s) are refused by the command guard" in html


@pytest.mark.slow
def test_the_scheduler_warns_at_its_start(tmp_path, migrated_sqlite):
    site = processes.Site(
        tmp_path,
        processes.copy_sqlite(migrated_sqlite, tmp_path / "db.sqlite3"),
        JOBS_COMMAND_ENABLED="true",
    )
    site.django(
        "from jobs.models import Job\n"
        "Job.objects.create(name='backup', kind='command', schedule_type='none', timezone='UTC',"
        " properties={'command': '/bin/true', 'env': {'AWS_REGION': 'eu-west-1'}})\n"
    )
    started = site.manage("runscheduler", "--once")
    assert (
        "WARNING: 1 command job(s) are refused by the command guard and their runs fail until they are edited"
        in started.stderr
    ), started.stderr


@pytest.mark.django_db
def test_jobs_naming_an_environment_secret_their_namespace_is_not_given_are_listed(make_job, settings):
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {}
    make_job(name="billing-sync", namespace="billing", properties={"auth": "Bearer {{ env:BILLING_TOKEN }}"})
    make_job(name="global-sync", properties={"auth": "Bearer {{ env:BILLING_TOKEN }}"})
    (listed,) = stored_refusals()
    assert listed.startswith("1 job(s) name an environment secret that CRONBOARD_ENV_SECRET_NAMESPACES"), (
        listed
    )
    assert listed.endswith(": billing-sync") and "global-sync" not in listed
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {"BILLING_TOKEN": frozenset({"billing"})}
    assert stored_refusals() == []
