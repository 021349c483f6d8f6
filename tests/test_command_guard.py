"""The command guard: which environment variables a command job may set and
which argument vectors JOBS_COMMAND_ALLOWED lets it run, refused with a coded
error at every save (API, console form, import, run overrides) and again
before every run of a job saved under older rules."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs import commandguard
from jobs.handlers.base import HandlerError
from jobs.handlers.command import CommandJobHandler
from jobs.models import Job, Run
from tests.factories import job_data
from tests.fixtures.commands import T0, make_ctx
from tests.fixtures.core import drain

REPO = Path(__file__).resolve().parent.parent
CMD_JOB = {"name": "guarded", "kind": "command", "cron_expression": "0 0 3 * * *"}


@pytest.fixture(autouse=True)
def _enabled(settings):
    settings.JOBS_COMMAND_ENABLED = True
    settings.JOBS_COMMAND_KILL_GRACE_SECONDS = 1


@pytest.fixture
def script(tmp_path, settings):
    """An allowed bash script (by its absolute path) and the file an
    injected `touch` would create."""
    path = tmp_path / "report.sh"
    path.write_text("#!/bin/bash\necho report done\n")
    path.chmod(0o755)
    settings.JOBS_COMMAND_ALLOWED = [str(path)]
    return path, tmp_path / "pwned"


def save(api, props, name="guarded"):
    return api.post("/api/jobs", {**CMD_JOB, "name": name, "properties": props})


# -- environment variables -----------------------------------------------------------


@pytest.mark.django_db
def test_bash_env_cannot_run_code_through_an_allowed_script(superuser_api, settings, script):
    """An allowed bash script, and env {"BASH_ENV": "$(id)"} ran `id`
    through it: bash expands BASH_ENV before it reads the script."""
    path, marker = script
    settings.JOBS_COMMAND_ENV_ALLOWED = ["*"]  # even when every other name may be set
    props = {"command": str(path), "env": json.dumps({"BASH_ENV": f"$(touch {marker})"})}
    response = save(superuser_api, props)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "command_env" and response.json()["field"] == "properties"
    assert "BASH_ENV" in response.json()["message"]
    assert not Job.objects.filter(name="guarded").exists()
    with pytest.raises(HandlerError, match="env may not set BASH_ENV"):
        CommandJobHandler().run(make_ctx(props))
    assert not marker.exists()
    plain = {"command": str(path), "env": json.dumps({"REPORT_DAY": "monday"})}
    assert save(superuser_api, plain).status_code == 201


NEVER = [
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PS4",
    "CDPATH",
    "PROMPT_COMMAND",
    "LD_PRELOAD",
    "LD_AUDIT",
    "ld_preload",
    "Ld_Library_Path",
    "DYLD_INSERT_LIBRARIES",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "pythonwarnings",
    "PERL5OPT",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_COUNT",
    "SSH_ASKPASS",
    "LESSOPEN",
    "LESS",
    "RSYNC_RSH",
    "TAR_OPTIONS",
    "PSQLRC",
    "MAKEFLAGS",
    "KRB5_CONFIG",
    "SASL_PATH",
    "EDITOR",
    "PAGER",
    "OPENSSL_CONF",
    "LUA_INIT",
    "PHPRC",
    "DOTNET_STARTUP_HOOKS",
    "TERMINFO",
    "CRONBOARD_RUN_ID",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "KUBECONFIG",
    "DOCKER_CONFIG",
    "RUSTC_WRAPPER",
    "RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_HOME",
    "GOFLAGS",
    "GOENV",
    "VIMINIT",
    "EXINIT",
    "MAVEN_OPTS",
    "GRADLE_OPTS",
    "npm_config_node_options",
    "PIP_INDEX_URL",
    "BUNDLE_GEMFILE",
]


@pytest.mark.django_db
@pytest.mark.parametrize("name", NEVER)
def test_names_that_load_or_run_other_code_are_never_allowed(superuser_api, settings, name):
    settings.JOBS_COMMAND_ENV_ALLOWED = ["*", name]
    props = {"command": "/bin/echo hi", "env": json.dumps({name: "/tmp/x"})}
    response = save(superuser_api, props)
    assert response.status_code == 400 and response.json()["code"] == "command_env", response.content
    assert name in response.json()["message"] and "never allowed" in response.json()["message"]
    with pytest.raises(HandlerError, match=f"env may not set {name}"):
        CommandJobHandler().run(make_ctx(props))


HOSTILE_NAMES = [
    "A=B",
    "A\x00B",
    "A\nB",
    "LD_PRELOAD\n",
    "",
    " A",
    "A B",
    "1ABC",
    "ÄRGER",
    "ＬＤ_PRELOAD",  # full-width letters
    "A\u200bB",  # zero-width space
    "BASH_FUNC_x%%",
    "A-B",
    "x" * 5000,
]


@pytest.mark.django_db
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_only_plain_names_are_accepted_and_nothing_else_gives_a_500(superuser_api, settings, name):
    settings.JOBS_COMMAND_ENV_ALLOWED = ["*"]
    props = {"command": "/bin/echo hi", "env": json.dumps({name: "v"})}
    response = save(superuser_api, props)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "properties"
    # One rule, one place: parse_env says what the guard says (it had a check of its own).
    guard = commandguard.env_name_refusal(name, allowed=["*"], programs_limited=False)
    assert guard in response.json()["message"], (guard, response.json())
    assert not Job.objects.filter(name="guarded").exists()
    with pytest.raises(HandlerError, match="not an environment variable name|invalid properties"):
        CommandJobHandler().run(make_ctx(props))


@pytest.mark.django_db
def test_a_locale_terminal_or_zone_name_may_not_be_a_path(superuser_api, settings):
    """The C library loads the file such a value names (sudo's env_check)."""
    settings.JOBS_COMMAND_ENV_ALLOWED = ["LANG", "LC_*", "TERM", "TZ"]
    for n, (name, value) in enumerate(
        (
            ("LANG", "/tmp/x"),
            ("LC_ALL", "C%n"),
            ("TERM", "../../tmp/x"),
            ("TZ", "/etc/passwd"),
            ("TZ", ":/tmp/x"),
            ("TZ", "../x"),
        )
    ):
        props = {"command": "/bin/true", "env": json.dumps({name: value})}
        response = save(superuser_api, props, name=f"value-{n}")
        assert response.status_code == 400 and response.json()["code"] == "command_env", (name, value)
        assert response.json()["message"].startswith(f"env may not set {name} to"), response.json()
        with pytest.raises(HandlerError, match=f"env may not set {name} to"):
            CommandJobHandler().run(make_ctx(props))
    fine = {"LANG": "C.UTF-8", "LC_ALL": "de_DE.UTF-8", "TERM": "xterm-256color", "TZ": "Europe/Berlin"}
    assert save(superuser_api, {"command": "/bin/true", "env": json.dumps(fine)}).status_code == 201


@pytest.mark.django_db
def test_a_job_may_set_only_the_names_the_operator_lists(superuser_api, settings):
    props = {"command": "/bin/echo hi", "env": json.dumps({"REGION": "eu"})}
    refused = save(superuser_api, props)  # the default: no names at all
    assert refused.status_code == 400 and refused.json()["code"] == "command_env"
    assert "JOBS_COMMAND_ENV_ALLOWED" in refused.json()["message"]
    settings.JOBS_COMMAND_ENV_ALLOWED = ["region"]  # patterns are case-sensitive
    assert save(superuser_api, props).status_code == 400
    settings.JOBS_COMMAND_ENV_ALLOWED = ["PGPASSWORD", "REG*"]
    assert save(superuser_api, props).status_code == 201
    assert save(superuser_api, {"command": "/bin/true"}, name="no-env").status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["PATH", "HOME", "XDG_CONFIG_HOME", "SHELL"])
def test_with_an_allow_list_the_env_cannot_steer_a_permitted_name(superuser_api, settings, tmp_path, name):
    """`echo` permitted, and env {"PATH": a folder of one's own} ran that
    folder's `echo`: whatever program one liked, under a permitted name.
    HOME and XDG_* choose the configuration files programs read, which hold
    commands for many of them (git's core.pager, ssh's ProxyCommand)."""
    settings.JOBS_COMMAND_ENV_ALLOWED = ["*"]
    settings.JOBS_COMMAND_ALLOWED = ["echo"]
    steered = {"command": "echo hi", "env": json.dumps({name: str(tmp_path)})}
    response = save(superuser_api, steered)
    assert response.status_code == 400 and response.json()["code"] == "command_env", response.content
    assert name in response.json()["message"]
    with pytest.raises(HandlerError, match=f"env may not set {name} while JOBS_COMMAND_ALLOWED"):
        CommandJobHandler().run(make_ctx(steered))
    settings.JOBS_COMMAND_ALLOWED = []  # any program may run: choosing its PATH adds nothing
    assert save(superuser_api, steered).status_code == 201


@pytest.mark.django_db
def test_a_job_saved_before_the_rules_is_refused_at_its_run(make_job, make_scheduler, settings, script):
    path, marker = script
    settings.JOBS_COMMAND_ENV_ALLOWED = ["*"]
    job = make_job(
        kind=Job.Kind.COMMAND,
        handler="",
        properties={"command": str(path), "env": json.dumps({"BASH_ENV": f"$(touch {marker})"})},
    )
    s = make_scheduler(max_workers=1, clock=lambda: T0, misfire_threshold=60)
    run = Run.objects.create(job=job, scheduled_at=T0, run_after=T0, trigger="manual")
    assert s.claim_queued(T0)
    drain(s, T0)
    run.refresh_from_db()
    assert run.status == "failed" and "env may not set BASH_ENV" in run.error, run.error
    assert not marker.exists()


@pytest.mark.django_db
def test_the_console_form_import_and_run_overrides_refuse_the_same(
    client, superuser, superuser_api, make_job, tmp_path, settings
):
    settings.JOBS_COMMAND_ENV_ALLOWED = ["REGION"]
    env = json.dumps({"PERL5OPT": "-Mx"})
    client.force_login(superuser)
    data = job_data(
        name="form-job",
        kind="command",
        handler="",
        properties=json.dumps({"command": "/bin/echo hi", "env": env}),
        timezone="UTC",
    )
    form = client.post("/jobs/new/", data)
    assert form.status_code == 200 and "PERL5OPT" in form.content.decode()
    assert not Job.objects.filter(name="form-job").exists()

    path = tmp_path / "jobs.json"
    spec = {**CMD_JOB, "name": "imported", "properties": {"command": "/bin/echo hi", "env": env}}
    path.write_text(json.dumps([spec]))
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was saved"):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "error command_env: job 'imported', field properties" in err.getvalue()
    assert not Job.objects.filter(name="imported").exists()

    job = make_job(
        name="plain-cmd", kind=Job.Kind.COMMAND, handler="", properties={"command": "/bin/echo hi"}
    )
    with pytest.raises(CommandError, match="PERL5OPT"):
        call_command("jobs", "run", job.name, "--set", f"env={env}", stdout=StringIO(), stderr=StringIO())
    override = superuser_api.post(f"/api/jobs/{job.pk}/run", {"properties": {"env": env}})
    assert override.status_code == 400 and override.json()["code"] == "command_env", override.content
    assert not Run.objects.filter(job=job).exists()


# -- argument vectors ----------------------------------------------------------------


@pytest.mark.django_db
def test_an_entry_may_pin_the_arguments(superuser_api, settings, tmp_path):
    """`find` allowed, and `find … -exec id ;` ran `id`: an entry with
    arguments allows exactly that vector, its patterns matched one by one."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "old.tmp").write_text("x")
    marker = tmp_path / "pwned"
    settings.JOBS_COMMAND_ALLOWED = [f"find {data} -name *.tmp -delete", "/bin/echo"]
    ok = {"command": json.dumps(["find", str(data), "-name", "old.tmp", "-delete"])}
    assert save(superuser_api, ok).status_code == 201
    ctx = make_ctx(ok)
    assert CommandJobHandler().run(ctx) == "exit status 0" and not (data / "old.tmp").exists()
    for n, argv in enumerate(
        (
            ["find", str(data), "-name", "x.tmp", "-exec", "touch", str(marker), ";"],
            ["find", str(data), "-name", "x.tmp", "-delete", "-exec", "touch", str(marker), ";"],
            ["find", str(data), "-name", "x.txt", "-delete"],
            ["find", "/", "-name", "x.tmp", "-delete"],
            ["find", str(data), "-name", "x.tmp"],
            ["/usr/bin/find", str(data), "-name", "x.tmp", "-delete"],  # not the entry's program
        )
    ):
        props = {"command": json.dumps(argv)}
        response = save(superuser_api, props, name=f"refused-{n}")
        assert response.status_code == 400, (argv, response.content)
        assert response.json()["code"] == "command_not_allowed"
        with pytest.raises(HandlerError, match="JOBS_COMMAND_ALLOWED"):
            CommandJobHandler().run(make_ctx(props))
    assert not marker.exists()
    anything = {"command": json.dumps(["/bin/echo", "-e", "any", "arguments"])}
    assert save(superuser_api, anything, name="echo-any").status_code == 201


def test_a_program_alone_allows_everything_it_can_do(settings, tmp_path):
    """What the docs warn of: an entry without arguments allows `-exec`."""
    marker = tmp_path / "ran"
    settings.JOBS_COMMAND_ALLOWED = ["find"]
    ctx = make_ctx(
        {"command": json.dumps(["find", str(tmp_path), "-maxdepth", "0", "-exec", "touch", str(marker), ";"])}
    )
    assert CommandJobHandler().run(ctx) == "exit status 0"
    assert marker.exists()


def test_entries_are_split_on_commas_outside_quotes():
    text = "find /srv -name '*,v' -delete, pg_dump ,/usr/local/bin/backup.sh a\\,b"
    assert commandguard.split_entries(text) == [
        "find /srv -name '*,v' -delete",
        "pg_dump",
        "/usr/local/bin/backup.sh a,b",
    ]
    words = commandguard.parse_entry(commandguard.split_entries(text)[0])
    assert commandguard.entry_allows(words, ["find", "/srv", "-name", "*,v", "-delete"])
    assert not commandguard.entry_allows(words, ["find", "/srv", "-name", "*,v", "-delete", "-print"])
    documented = next(
        line.partition("=")[2]
        for line in (REPO / "docs" / "handlers.md").read_text().splitlines()
        if line.startswith("JOBS_COMMAND_ALLOWED=")
    )
    find = commandguard.parse_entry(commandguard.split_entries(documented)[1])
    assert commandguard.entry_allows(
        find, ["/usr/bin/find", "/var/spool/app", "-name", "a.tmp", "-mmin", "+60", "-delete"]
    )
    literal = commandguard.parse_entry("rm [*]")
    assert commandguard.entry_allows(literal, ["rm", "*"]) and not commandguard.entry_allows(
        literal, ["rm", "x"]
    )


def test_an_argument_pattern_does_not_match_an_option(superuser_api, settings, tmp_path):
    """`ssh * uptime` allowed `ssh -oProxyCommand=… uptime`, and `sort -o X *`
    a `--compress-program=…`: a `*` matched an option, which runs a command.
    A pattern matches an argument starting with `-` only if it starts with one."""
    ssh = commandguard.parse_entry("ssh * uptime")
    assert commandguard.entry_allows(ssh, ["ssh", "db1.example", "uptime"])
    assert not commandguard.entry_allows(ssh, ["ssh", '-oProxyCommand=sh -c "id>/tmp/p"', "uptime"])
    git = commandguard.parse_entry("git -C /srv/repo fetch *")
    assert commandguard.entry_allows(git, ["git", "-C", "/srv/repo", "fetch", "origin"])
    assert not commandguard.entry_allows(
        git, ["git", "-C", "/srv/repo", "fetch", "--upload-pack=touch /tmp/p"]
    )
    for pattern in ("?*", "[!a]*", "*x"):
        assert not commandguard.entry_allows(commandguard.parse_entry(f"rm {pattern}"), ["rm", "-rfx"])
    level = commandguard.parse_entry("gzip --best=* -- *")
    assert commandguard.entry_allows(level, ["gzip", "--best=9", "--", "a.log"])
    assert not commandguard.entry_allows(level, ["gzip", "--best=9", "-d", "a.log"])
    marker = tmp_path / "pwned"
    out = tmp_path / "out"
    settings.JOBS_COMMAND_ALLOWED = [f"sort -o {out} *"]
    props = {"command": json.dumps(["sort", "-o", str(out), f"--compress-program=touch {marker}"])}
    response = save(superuser_api, props)
    assert response.status_code == 400 and response.json()["code"] == "command_not_allowed", response.content
    with pytest.raises(HandlerError, match="JOBS_COMMAND_ALLOWED"):
        CommandJobHandler().run(make_ctx(props))
    assert not marker.exists()
    (tmp_path / "in").write_text("b\na\n")
    ok = {"command": json.dumps(["sort", "-o", str(out), str(tmp_path / "in")])}
    assert CommandJobHandler().run(make_ctx(ok)) == "exit status 0" and out.read_text() == "a\nb\n"


def test_an_env_pattern_must_name_something():
    """`JOBS_COMMAND_ENV_ALLOWED=*` was accepted although the docs said "not `*`":
    a pattern without a literal character allows every name, those the never
    list learns later included."""
    for pattern in ("*", "?*", "**", "???", "[AB]*"):
        with pytest.raises(ValueError, match="no literal character"):
            commandguard.check_env_patterns(["REGION", pattern])
    commandguard.check_env_patterns(["REGION", "BACKUP_*", "PG?", "AWS_*"])
    for name in ("AWS_CONFIG_FILE", "KUBECONFIG", "CARGO_HOME", "GOFLAGS"):
        with pytest.raises(ValueError, match="never set it"):
            commandguard.check_env_patterns([name])
    assert "not `*`" not in (REPO / "docs" / "handlers.md").read_text()


def settings_error(**env) -> str:
    """The last line a process prints when it loads the settings with this environment."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_COMMAND")}
    environ.update(DJANGO_SETTINGS_MODULE="config.settings", PYTHONPATH=str(REPO), **env)
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.JOBS_COMMAND_ALLOWED"],
        env=environ,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.stderr.strip().splitlines()[-1] if result.returncode else ""


@pytest.mark.slow
def test_bad_command_settings_stop_the_process_naming_the_setting():
    assert "ImproperlyConfigured: JOBS_COMMAND_CGROUP" in settings_error(JOBS_COMMAND_CGROUP="sometimes")
    for value in ("LD_PRELOAD", "ld_preload", "A=B", "BASH_ENV,REGION", "*", "REGION,?*", "KUBECONFIG"):
        assert "ImproperlyConfigured: JOBS_COMMAND_ENV_ALLOWED" in settings_error(
            JOBS_COMMAND_ENV_ALLOWED=value
        )
    for value in ("./backup.sh", "bin/x", "'unclosed", "find*"):
        assert "ImproperlyConfigured: JOBS_COMMAND_ALLOWED" in settings_error(JOBS_COMMAND_ALLOWED=value)
    assert (
        settings_error(JOBS_COMMAND_ENV_ALLOWED="REGION,PG*", JOBS_COMMAND_ALLOWED="find /a -delete,echo")
        == ""
    )


def test_a_permitted_name_is_not_found_in_the_jobs_working_directory(settings, tmp_path, monkeypatch):
    """The scheduler's PATH with an empty entry (or `.`) searched the job's
    cwd, which the job chooses: a program of one's own under a permitted name."""
    own = tmp_path / "report"
    own.write_text(f"#!/bin/sh\ntouch {tmp_path / 'pwned'}\n")
    own.chmod(0o755)
    settings.JOBS_COMMAND_ALLOWED = ["report"]
    monkeypatch.setenv("PATH", f":.:{os.environ['PATH']}")
    with pytest.raises(HandlerError, match="could not start 'report'"):
        CommandJobHandler().run(make_ctx({"command": "report", "cwd": str(tmp_path)}))
    assert not (tmp_path / "pwned").exists()
