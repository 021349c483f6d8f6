"""The API's operations on one run: read it, with its log, and cancel it."""

from django.http import JsonResponse
from ninja import Router

from jobs import access, services
from jobs.api.framework import VIA, ApiError
from jobs.api.schemas.base import CHANGE_ERRORS, OBJECT_ERRORS
from jobs.api.schemas.runs import Run, RunDetail
from jobs.serializers import run_to_dict

router = Router()

RUN_ID = "{int:run_id}"


@router.get(
    f"/runs/{RUN_ID}",
    operation_id="getRun",
    url_name="run",
    summary="One run, with its log.",
    response={200: RunDetail, **OBJECT_ERRORS},
)
def get_run(request, run_id: int):
    run = access.get_run_for_user(request.user, run_id)
    return JsonResponse(
        run_to_dict(run, with_log=True, mask_credentials=not access.sees_credentials(request.user, run.job))
    )


@router.post(
    f"/runs/{RUN_ID}/cancel",
    operation_id="cancelRun",
    url_name="run_cancel",
    summary="Cancel a queued run, or ask a running one to stop (operator).",
    response={200: Run, **CHANGE_ERRORS},
)
def cancel_run(request, run_id: int):
    run = access.get_run_for_user(request.user, run_id)
    if not access.can_act_on_run(request.user, run):
        raise ApiError(403, "forbidden", "Your role may not run, pause or cancel jobs here.")
    if not run.is_live:
        raise ApiError(
            409, "not_live", f"This run is {run.status}; only a queued or running run can be cancelled."
        )
    services.cancel_run(run=run, user=request.user, via=VIA)
    return JsonResponse(run_to_dict(run))
