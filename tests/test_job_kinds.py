"""The table of job kinds (jobs.kinds): one row per kind says whether this
server runs it, which properties the form edits as fields, how they are
checked, which handler runs it and who may change it; the form and the
services read it there."""

import ast
import dataclasses
from pathlib import Path

import pytest

from jobs import kinds, refusals
from jobs.engine.execution.pool import HandlerRef
from jobs.forms import JobForm
from jobs.handlers.command import CommandJobHandler
from jobs.handlers.http import HttpJobHandler
from jobs.handlers.sql import SqlJobHandler
from jobs.models import Job
from tests.factories import job_data

K = Job.Kind


def test_every_kind_has_one_row_saying_what_it_edits_and_who_may_change_it():
    assert set(kinds.KINDS) == set(K.values)
    assert kinds.KIND_FIELDS == {K.HTTP: ("url", "method", "headers", "body"), K.SQL: ("sql",)}
    assert {"url", "method", "headers", "body", "sql"} == kinds.PROPERTY_FIELDS
    assert set(kinds.GUARDED_KINDS) == {K.HTTP, K.SQL, K.COMMAND}
    assert set(kinds.SUPERUSER_KINDS) == {K.SQL, K.COMMAND}
    assert refusals.GUARDED_KINDS is kinds.GUARDED_KINDS


@pytest.mark.parametrize(
    ("kind", "handler"),
    [(K.HTTP, HttpJobHandler), (K.SQL, SqlJobHandler), (K.COMMAND, CommandJobHandler)],
)
def test_a_kinds_row_names_the_handler_the_executor_runs(kind, handler):
    assert kinds.get(kind).handler_class("ignored") is handler
    assert type(HandlerRef(kind, "ignored")()) is handler
    assert HandlerRef(kind, "ignored").module() is None


def test_the_executor_runs_the_handler_its_kinds_row_names(monkeypatch):
    # A row that named another handler changes what the executor runs: it
    # has no mapping of its own.
    row = dataclasses.replace(kinds.KINDS[K.HTTP], handler="jobs.handlers.sql.SqlJobHandler")
    monkeypatch.setitem(kinds.KINDS, K.HTTP, row)

    assert type(HandlerRef(K.HTTP, "ignored")()) is SqlJobHandler


def test_a_python_job_runs_the_registered_handler_it_names():
    assert type(HandlerRef(K.PYTHON, "demo.echo")()) is type(kinds.handler_for(K.PYTHON, "demo.echo"))


def test_sql_and_command_kinds_follow_their_switches_and_a_stored_kind_stays_offered(settings):
    settings.JOBS_SQL_ENABLED = False
    settings.JOBS_COMMAND_ENABLED = False
    assert [value for value, _label in kinds.offered_choices()] == [K.PYTHON, K.HTTP]
    assert [value for value, _label in kinds.offered_choices(K.SQL)] == [K.PYTHON, K.HTTP, K.SQL]

    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_COMMAND_ENABLED = True
    assert kinds.get(K.SQL).enabled() and kinds.get(K.COMMAND).enabled()
    assert [value for value, _label in kinds.offered_choices()] == list(K.values)


@pytest.mark.django_db
def test_the_form_reads_the_kinds_own_fields_and_defaults_from_the_table(monkeypatch):
    monkeypatch.setattr("jobs.handlers.http.check_url", lambda url, **kwargs: None, raising=False)
    form = JobForm(
        data=job_data(kind=K.HTTP, handler="demo.echo", url="https://example.com/hook", properties="{}")
    )
    form.is_valid()

    assert form.cleaned_data["handler"] == ""
    assert {k: form.cleaned_data["properties"].get(k) for k in ("url", "method")} == {
        "url": "https://example.com/hook",
        "method": "GET",
    }


@pytest.mark.django_db
def test_an_sql_job_is_refused_on_kind_while_sql_jobs_are_off(settings):
    settings.JOBS_SQL_ENABLED = False
    form = JobForm(data=job_data(kind=K.SQL, sql="select 1"))

    assert not form.is_valid()
    assert [(e["field"], e["code"]) for e in form.error_list()] == [("kind", "sql_disabled")]


def _imports(module: str) -> set[str]:
    tree = ast.parse(Path(module).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(
    "module", ["jobs/services.py", "jobs/refusals.py", "jobs/tasks.py", "jobs/kinds.py", "jobs/properties.py"]
)
def test_the_modules_below_the_forms_never_import_them(module):
    assert not {name for name in _imports(module) if name == "jobs.forms" or name.startswith("jobs.forms.")}
