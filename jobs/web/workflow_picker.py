"""The job form's "Runs after" picker: the upstreams as rows (each with its
schedule and the outcome it waits for), a search of the jobs the editor
may see by name, and the graph's refusal (jobs.workflows: 47007 unknown,
47008 loop, 47009 too deep, 47010 too wide, 47011 namespace) worked out as
it is edited, like the cron preview. Every change comes back here, which
answers the picker and, out of band, the `after` field with the JSON it
writes: the field stays the one the form posts, and without JavaScript it
is typed as before."""

import json

from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.views.decorators.http import require_GET

from jobs import access, workflows
from jobs.access import login_required
from jobs.models import Job, JobDependency, job_name
from jobs.web.common import describe_schedule, role_required

SEARCH_RESULTS = 8


def picker_context(user, params) -> dict:
    """The picker's rows, search results and refusal for `params` (the
    field's text `after`, the job's `name` and, when editing, `after_job`;
    an `op` on a `target` with `after_on`; the search `after_q`)."""
    text = params.get("after", "")
    name = job_name(params.get("name", ""))[:200]
    editing = None
    if params.get("after_job", "").isdigit():
        editing = access.visible_jobs(user).filter(pk=int(params["after_job"])).first()
    changed = False
    try:
        after = workflows.coerce_after(text)
    except ValidationError as exc:
        return {
            "error": {"code": "", "message": " ".join(exc.messages)},
            "rows": [],
            "ons": JobDependency.On.choices,
        }
    op, target = params.get("op", ""), job_name(params.get("target", ""))[:200]
    if op == "add" and target and target not in {item["job"] for item in after}:
        on = params.get("after_on")
        after.append({"job": target, "on": on if on in JobDependency.On.values else JobDependency.On.SUCCESS})
        changed = True
    elif op == "remove":
        after = [item for item in after if item["job"] != target]
        changed = True
    elif op == "on" and params.get("after_on") in JobDependency.On.values:
        for item in after:
            if item["job"] == target:
                item["on"] = params["after_on"]
                changed = True
    error = _refusal(user, name=name, after=after, editing=editing)
    visible = {
        job.name: job
        for job in access.visible_jobs(user)
        .named(*[item["job"] for item in after])
        .only("id", "name", "namespace", "schedule_type", "cron_expression", "interval_seconds", "state")
    }
    rows = [
        {
            "name": item["job"],
            "on": item["on"],
            "job": visible.get(item["job"]),
            "schedule": describe_schedule(visible[item["job"]]) if item["job"] in visible else "",
        }
        for item in after
    ]
    query = job_name(params.get("after_q", ""))[:200]
    results = []
    if query:
        taken = {item["job"] for item in after} | {name, editing.name if editing else ""}
        found = (
            access.visible_jobs(user)
            .filter(name__icontains=query)
            .exclude(name__in=taken)
            .order_by("name")
            .only("id", "name", "namespace", "schedule_type", "cron_expression", "interval_seconds")
        )
        results = [{"job": job, "schedule": describe_schedule(job)} for job in found[:SEARCH_RESULTS]]
    return {
        "rows": rows,
        "error": error,
        "query": query,
        "results": results,
        "searched": bool(query),
        "text": json.dumps(after, indent=2, ensure_ascii=False) if after else "",
        "changed": changed,
        "ons": JobDependency.On.choices,
    }


def _refusal(user, *, name: str, after: list[dict], editing: Job | None) -> dict | None:
    """What JobForm would say of these upstreams (its rules, jobs.workflows)."""
    if not after:
        return None
    upstreams = [item["job"] for item in after]
    error = workflows.refusal(
        name=name or (editing.name if editing else ""),
        upstreams=upstreams,
        stored_name=editing.name if editing else None,
    )
    if error is None:
        before = set(editing.upstream_names) if editing else set()
        error = workflows.namespace_refusal(user=user, added=set(upstreams) - before)
    if error is None:
        return None
    return {"code": error.code if str(error.code).isdigit() else "", "message": " ".join(error.messages)}


@login_required
@require_GET
@role_required(access.EDIT)
def after_picker(request):
    """The picker, answered to htmx as it is edited (its partial), with the
    `after` field out of band when an add, a removal or an outcome changed it."""
    return render(
        request, "jobs/_after_picker.html", {**picker_context(request.user, request.GET), "oob": True}
    )
