"""Jobs as code: reading a `jobs import` file and upserting its jobs by
name, all or nothing. `manage.py jobs import` and the console's import page
(with its preview of what would change) both go through here, so a file is
read and validated the same way by both; JobForm decides what is valid."""

import collections
import copy
import json
from collections.abc import Hashable
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from jobs import audit, jsontext, refusals, services, workflows
from jobs.forms import JobForm
from jobs.models import AuditEvent, Job, job_name
from jobs.serializers import spec_errors, spec_to_form_data
from jobs.text import find_unstorable, storable
from jobs.workflows import Workflow


class ImportFileError(ValueError):
    """The file is not a list of job objects (bad JSON, names twice, …)."""


class ImportFailed(Exception):
    """Some jobs are invalid: [{job, code, message, field}]; nothing was saved."""

    def __init__(self, errors):
        super().__init__(f"{len(errors)} error(s)")
        self.errors = errors


def parse(text: str, *, source: str = "the file") -> list[dict]:
    """The job specs in a file's text; ImportFileError says what is wrong."""
    specs = parse_json(text, source=source)
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise ImportFileError(_("{source} must hold a JSON list of job objects.").format(source=source))
    return _checked(specs, source)


def parse_json(text: str, *, source: str = "the file"):
    """A file's JSON, read strictly (jobs.jsontext); ImportFileError says
    what is wrong. `jobs import-calendars` reads its file with it too."""
    try:
        json.loads(text)  # for the line and column of a syntax error
        specs = jsontext.loads(text)  # duplicate keys, NaN, nesting beyond the stack
    except json.JSONDecodeError as exc:
        raise ImportFileError(
            _("{source} is not valid JSON: {error} (line {line}, column {column})").format(
                source=source, error=exc.msg, line=exc.lineno, column=exc.colno
            )
        ) from None
    except (jsontext.JsonTextError, RecursionError) as exc:
        raise ImportFileError(
            storable(
                _("{source} is not valid JSON: {error}").format(
                    source=source, error=getattr(exc, "message", "nested too deeply")
                )
            )
        ) from None
    return specs


def _checked(specs: list[dict], source: str) -> list[dict]:
    # Two spellings of one name (jobs.models.job_name) are the same job.
    counts = collections.Counter(
        job_name(s["name"]) if isinstance(s.get("name"), str) else s.get("name")
        for s in specs
        if isinstance(s.get("name"), Hashable)
    )
    dupes = sorted(str(name) for name, count in counts.items() if count > 1)
    if dupes:
        raise ImportFileError(
            storable(
                _("{source} names these jobs more than once: {names}; nothing was saved.").format(
                    source=source, names=", ".join(dupes)
                )
            )
        )
    return specs


@dataclass
class Planned:
    """What importing one spec would do."""

    name: str
    action: str  # "create" | "update" | "unchanged" | "invalid"
    changes: dict = field(default_factory=dict)  # {field: [stored, imported]}
    errors: list = field(default_factory=list)
    form: JobForm | None = None


def plan(specs: list[dict], *, user=None) -> list[Planned]:
    """Validate every spec against what is stored, changing nothing."""
    out = []
    workflow = _workflow(specs)
    for index, spec in enumerate(specs):
        name = spec.get("name")
        # Shown in the console and on a terminal: text no database stores
        # (jobs.text) is shown, like the messages quoting it, repaired.
        label = storable(name) if isinstance(name, str) and name else f"#{index + 1}"
        # The JSON's own problems (unknown keys, wrong types), as the API reports them.
        errors = [{"job": label, **e} for e in spec_errors(spec)]
        # A name the form will refuse as text no database stores is not
        # looked up: the lookup itself would fail.
        instance = (
            Job.objects.named(name).first() if isinstance(name, str) and not find_unstorable(name) else None
        )
        # Before the form: validating copies the new values onto the instance.
        before = audit.snapshot(instance) if instance is not None else None
        stored = copy.copy(instance)
        form = JobForm(
            data=spec_to_form_data(spec, instance=instance), instance=instance, user=user, workflow=workflow
        )
        if not form.is_valid():
            errors.extend({"job": label, **e} for e in form.error_list())
        errors = [{**e, "message": storable(e["message"])} for e in errors]
        if errors:
            out.append(Planned(label, "invalid", errors=errors))
            continue
        job = form.save(commit=False)
        if stored is not None:
            # The state the save will write (a file names no version: an
            # export writes a crashed job as enabled, and importing it back
            # leaves it crashed; `jobs resume` re-enables it).
            job.state = job.state_after_edit(stored, versioned=False)
        changes = audit.diff(before, audit.snapshot(job))
        action = "create" if instance is None else "update" if changes else "unchanged"
        out.append(Planned(label, action, changes=changes, form=form))
    return out


def apply(specs: list[dict], *, user=None, via: str = AuditEvent.Via.IMPORT) -> tuple[int, int, int]:
    """Upsert every spec or none: ImportFailed lists the problems. Returns
    (created, updated, unchanged); an unchanged job is not written at all.
    A person's import (`user` given: the console) is refused in demo mode
    (DemoModeError); `manage.py jobs import` (no user) is the operator's,
    who seeds the demo with it, and each job still meets demo mode's rules
    for jobs (services.save_job)."""
    if user is not None:
        refusals.check_demo_mode("importing jobs")
    created = updated = unchanged = 0
    with transaction.atomic():
        planned = plan(specs, user=user)
        errors = [e for p in planned for e in p.errors]
        if errors:
            raise ImportFailed(errors)
        workflow = _workflow(specs)
        for item in _upstreams_first(planned):
            try:
                _job, changed = services.save_job_if_changed(
                    job=item.form.save(commit=False), user=user, via=via, workflow=workflow
                )
            except refusals.GraphRefused as refused:
                # Another save changed the graph since the file was checked.
                raise ImportFailed([{"job": item.name, **e} for e in refused.error_list()]) from None
            except refusals.SaveBusy:
                raise ImportFailed(
                    [
                        {
                            "job": item.name,
                            "code": "busy",
                            "message": _(
                                "Other changes were being saved at the same moment; "
                                "nothing was saved. Import the file again."
                            ),
                            "field": None,
                        }
                    ]
                ) from None
            except refusals.StaleJobError:
                # Deleted (or changed) by another save since plan() read it.
                raise ImportFailed(
                    [
                        {
                            "job": item.name,
                            "code": "stale_version",
                            "message": _(
                                "This job was deleted or changed while the file was being imported; "
                                "nothing was saved. Import the file again."
                            ),
                            "field": None,
                        }
                    ]
                ) from None
            if item.action == "create":
                created += 1
            elif changed:
                updated += 1
            else:
                unchanged += 1
    return created, updated, unchanged


def _workflow(specs: list[dict]) -> Workflow:
    """{name: [upstream names]} of the file's jobs (those whose `after` reads
    as a list; JobForm reports the others) over the stored graph, so jobs of
    one file may follow each other in any order and a loop through the file
    is found."""
    graph = {}
    for spec in specs:
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip():
            continue
        try:
            after = workflows.coerce_after(spec.get("after"))
        except ValidationError:
            after = []
        graph[job_name(name)] = [item["job"] for item in after]
    return Workflow(graph)


def _upstreams_first(planned: list[Planned]) -> list[Planned]:
    """The planned jobs with each job's upstreams of the same file saved
    before it (there is no cycle: JobForm refused those)."""
    by_name = {item.form.cleaned_data["name"]: item for item in planned}
    order, done = [], set()

    def visit(item, depth=0):
        name = item.form.cleaned_data["name"]
        if name in done or depth > len(planned):
            return
        done.add(name)
        for upstream in item.form.cleaned_data.get("after") or []:
            if upstream["job"] in by_name:
                visit(by_name[upstream["job"]], depth + 1)
        order.append(item)

    for item in planned:
        visit(item)
    return order
