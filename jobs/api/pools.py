"""The API's concurrency pools (anyone signed in reads them, administrators
change them) and backfills (editors of the job start and cancel them)."""

from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from ninja import Path, Router

from jobs import access, backfills, pools
from jobs.api.framework import VIA, ApiError
from jobs.api.schemas import pools as schemas
from jobs.api.schemas.base import CHANGE_ERRORS, EDIT_ERRORS, ERRORS, OBJECT_ERRORS, Error
from jobs.models import POOL_NAME_PATTERN
from jobs.models import Backfill as BackfillRow
from jobs.serializers import iso

router = Router()
NAME = Path(..., description="The pool's name.", pattern=f"^{POOL_NAME_PATTERN}$")


def _refused(exc, status: int = 400) -> ApiError:
    return ApiError(status, exc.code, str(exc), exc.field)


@router.get(
    "/pools",
    operation_id="listPools",
    url_name="pools",
    summary="Concurrency pools.",
    response={200: schemas.PoolList, **ERRORS},
)
def list_pools(request):
    return JsonResponse({"results": pools.pool_rows()})


@router.put(
    "/pools/{name}",
    operation_id="setPool",
    url_name="pool",
    summary="Create a pool or change its size (admin).",
    response={200: schemas.Pool, **EDIT_ERRORS},
)
def set_pool(request, payload: schemas.PoolInput, name: str = NAME):
    try:
        pools.save_pool(
            name=name, size=payload.size, description=payload.description or "", user=request.user, via=VIA
        )
    except pools.PoolRefused as exc:
        raise _refused(exc) from None
    return JsonResponse(next(row for row in pools.pool_rows() if row["name"] == name))


@router.delete(
    "/pools/{name}",
    operation_id="deletePool",
    summary="Delete a pool no job uses (admin; 409 47022 while one does).",
    response={204: None, **CHANGE_ERRORS},
)
def delete_pool(request, name: str = NAME):
    try:
        deleted = pools.delete_pool(name=name, user=request.user, via=VIA)
    except pools.PoolRefused as exc:
        raise _refused(exc, 409) from None  # in use: a conflict with the jobs that name it
    if not deleted:
        raise ApiError(404, "not_found", "No such pool.")
    return HttpResponse(status=204)


def backfill_to_dict(backfill: BackfillRow) -> dict:
    return {
        "id": backfill.pk,
        "job_id": backfill.job_id,
        "range_start": iso(backfill.range_start),
        "range_end": iso(backfill.range_end),
        "parallel": backfill.parallel,
        "include_succeeded": backfill.include_succeeded,
        "fires": backfill.fires,
        "created_at": iso(backfill.created_at),
        "cancelled_at": iso(backfill.cancelled_at),
        "runs": backfills.progress(backfill),
    }


@router.post(
    "/jobs/{int:job_id}/backfill",
    operation_id="backfillJob",
    url_name="job_backfill",
    summary="Run a job's past fires in a range again (editor); dry_run only counts them.",
    description="One run per fire (trigger backfill, scheduled_at the fire), started `parallel` at a "
    "time in fire order. Fires with a successful run are left out unless include_succeeded. "
    "400 codes: 47024 over 10,000 fires, 47025 a range ending in the future or before it starts, "
    "47026 parallel, 47027 a job without a schedule.",
    response={200: schemas.BackfillPlan, 201: schemas.Backfill, **EDIT_ERRORS, 404: Error},
)
def backfill_job(request, job_id: int, payload: schemas.BackfillInput):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
    form = backfills.BackfillForm(payload.model_dump(exclude={"dry_run"}, exclude_none=True))
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    data = form.cleaned_data
    try:
        if payload.dry_run:
            plan = backfills.plan_backfill(
                job=job,
                start=data["range_start"],
                end=data["range_end"],
                include_succeeded=data["include_succeeded"],
            )
            return JsonResponse({"fires": len(plan.fires), "succeeded": plan.succeeded})
        backfill = backfills.start_backfill(
            job=job,
            start=data["range_start"],
            end=data["range_end"],
            parallel=data["parallel"],
            include_succeeded=data["include_succeeded"],
            user=request.user,
            via=VIA,
        )
    except backfills.BackfillRefused as exc:
        raise _refused(exc) from None
    return JsonResponse(backfill_to_dict(backfill), status=201)


def _backfill_for(request, backfill_id: int) -> BackfillRow:
    backfill = get_object_or_404(BackfillRow, pk=backfill_id)
    access.get_job_for_user(request.user, backfill.job_id)  # 404 outside the user's namespaces
    return backfill


@router.get(
    "/backfills/{int:backfill_id}",
    operation_id="getBackfill",
    url_name="backfill",
    summary="A backfill and its runs by status.",
    response={200: schemas.Backfill, **OBJECT_ERRORS},
)
def get_backfill(request, backfill_id: int):
    return JsonResponse(backfill_to_dict(_backfill_for(request, backfill_id)))


@router.post(
    "/backfills/{int:backfill_id}/cancel",
    operation_id="cancelBackfill",
    summary="Cancel a backfill as a whole (operator): waiting runs at once, running ones asked to stop.",
    response={200: schemas.Backfill, **CHANGE_ERRORS},
)
def cancel_backfill(request, backfill_id: int):
    backfill = _backfill_for(request, backfill_id)
    access.require(request.user, access.OPERATE, job=backfill.job)
    backfills.cancel_backfill(backfill=backfill, user=request.user, via=VIA)
    return JsonResponse(backfill_to_dict(backfill))
