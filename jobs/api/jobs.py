"""The API's operations on jobs: list, create, read, replace, change,
delete, pause or resume, run now, and a job's runs. Each validates a body's
meaning with the job form and writes through a service."""

import json

from django.core.exceptions import ValidationError
from django.http import HttpResponse, JsonResponse
from ninja import Body, Query, Router

from jobs import access, services
from jobs.api.framework import VIA, ApiError
from jobs.api.queries import decode_cursor, run_page
from jobs.api.schemas import jobs as schemas
from jobs.api.schemas.base import CHANGE_ERRORS, EDIT_ERRORS, ERRORS, OBJECT_ERRORS, Error
from jobs.api.schemas.runs import Run, RunFilters, RunPage
from jobs.forms import JobForm
from jobs.models import Job
from jobs.models import Run as RunModel
from jobs.serializers import JOB_FIELDS, job_page, job_to_dict, run_to_dict, spec_to_form_data

router = Router()

JOB_ID = "{int:job_id}"


def _spec(payload: schemas.JobFields) -> dict:
    """The fields the client sent, as the jobs-as-code spec reads them."""
    return payload.model_dump(include=payload.model_fields_set & {*JOB_FIELDS, "version"})


@router.get(
    "/jobs",
    operation_id="listJobs",
    url_name="jobs",
    summary="Live jobs you can see, oldest first, in pages; properties only with include=properties.",
    response={200: schemas.JobList, **ERRORS},
)
def list_jobs(request, filters: Query[schemas.JobFilters]):
    """Keyset-paginated on (created_at, id)."""
    jobs = access.visible_jobs(request.user, namespace=filters.namespace).select_related("owner")
    if filters.state:
        jobs = jobs.filter(state=filters.state)
    if filters.kind:
        jobs = jobs.filter(kind=filters.kind)
    properties = filters.include == schemas.INCLUDE_PROPERTIES
    masked = not access.sees_credentials(request.user)
    if not properties:
        jobs = jobs.defer("properties")
    page = job_page(
        jobs,
        limit=filters.limit,
        after=decode_cursor(filters.cursor) if filters.cursor else None,
        render=lambda job: json.dumps(job_to_dict(job, properties=properties, mask_credentials=masked)),
    )
    return HttpResponse(page.envelope(), content_type="application/json")


@router.post(
    "/jobs",
    operation_id="createJob",
    summary="Create a job (editor in its namespace).",
    response={201: schemas.Job, **EDIT_ERRORS},
)
def create_job(request, payload: schemas.JobCreate):
    access.require(request.user, access.EDIT)
    form = JobForm(spec_to_form_data(_spec(payload)), user=request.user)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(job=form.save(commit=False), user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job), status=201)


@router.get(
    f"/jobs/{JOB_ID}",
    operation_id="getJob",
    url_name="job",
    summary="One job.",
    response={200: schemas.Job, **OBJECT_ERRORS},
)
def get_job(request, job_id: int):
    job = access.get_job_for_user(request.user, job_id)
    return JsonResponse(job_to_dict(job, mask_credentials=not access.sees_credentials(request.user, job)))


def _save_job(request, job_id: int, payload: schemas.JobFields, *, replace: bool):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
    spec = _spec(payload)
    # PUT replaces (left-out fields take defaults); PATCH keeps them.
    form = JobForm(
        spec_to_form_data(spec, instance=None if replace else job), instance=job, user=request.user
    )
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(
        job=form.save(commit=False), user=request.user, via=VIA, expected_version=spec.get("version")
    )
    return JsonResponse(job_to_dict(job))


@router.put(
    f"/jobs/{JOB_ID}",
    operation_id="replaceJob",
    summary="Replace a job (editor); fields left out take their defaults.",
    response={200: schemas.Job, **EDIT_ERRORS, 404: Error, 409: Error},
)
def replace_job(request, job_id: int, payload: schemas.JobCreate):
    return _save_job(request, job_id, payload, replace=True)


@router.patch(
    f"/jobs/{JOB_ID}",
    operation_id="updateJob",
    summary="Change some fields of a job (editor).",
    response={200: schemas.Job, **EDIT_ERRORS, 404: Error, 409: Error},
)
def update_job(request, job_id: int, payload: schemas.JobInput):
    return _save_job(request, job_id, payload, replace=False)


@router.delete(
    f"/jobs/{JOB_ID}",
    operation_id="deleteJob",
    summary="Soft-delete a job (editor); built-in jobs cannot be deleted (409).",
    response={204: None, **CHANGE_ERRORS},
)
def delete_job(request, job_id: int):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
    services.delete_job(job=job, user=request.user, via=VIA)
    return HttpResponse(status=204)


@router.post(
    f"/jobs/{JOB_ID}/toggle",
    operation_id="toggleJob",
    url_name="job_toggle",
    summary="Pause an enabled job; resume a paused one or re-enable a crashed one (operator).",
    response={200: schemas.Job, **CHANGE_ERRORS},
)
def toggle_job(request, job_id: int):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.OPERATE, job=job)
    if job.state == Job.State.ENABLED:
        job = services.pause_job(job=job, user=request.user, via=VIA)
    else:
        job = services.resume_job(job=job, user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job))


@router.post(
    f"/jobs/{JOB_ID}/run",
    operation_id="runJob",
    url_name="job_run",
    summary="Queue a manual run (operator; refused in demo mode).",
    description="The body may be left out. `properties` overrides the job's properties for this run "
    "only (merged over them, validated like the job's own; 400 with field `properties` if not). "
    "While a manual run is queued or running, that run is the answer (200, not 201).",
    response={201: Run, 200: Run, **EDIT_ERRORS, 404: Error, 409: Error},
)
def run_job(request, job_id: int, payload: Body[schemas.RunNow] = None):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.OPERATE, job=job)
    overrides = payload.properties if payload is not None else None
    try:
        run, created = services.run_now(
            job=job, user=request.user, via=VIA, trigger=RunModel.Trigger.API, properties=overrides
        )
    except ValidationError as exc:
        raise ApiError.invalid(
            [
                {"code": exc.code or "invalid", "message": message, "field": "properties"}
                for message in exc.messages
            ]
        ) from None
    return JsonResponse(run_to_dict(run), status=201 if created else 200)


@router.get(
    f"/jobs/{JOB_ID}/runs",
    operation_id="listRuns",
    url_name="job_runs",
    summary="The job's runs, newest scheduled first.",
    response={200: RunPage, **ERRORS, 404: Error},
)
def list_job_runs(request, job_id: int, filters: Query[RunFilters]):
    """Keyset-paginated on (scheduled_at, id)."""
    job = access.get_job_for_user(request.user, job_id)
    return run_page(
        RunModel.objects.filter(job=job), filters, masked=not access.sees_credentials(request.user, job)
    )
