"""The API's one-off tasks: the registered handlers a task (or a python
job) may run, and enqueueing a task, validated by the task form."""

from django.http import JsonResponse
from ninja import Router

from jobs import access, refusals, tasks
from jobs.api.framework import ApiError
from jobs.api.schemas.base import EDIT_ERRORS, Error
from jobs.api.schemas.overview import HandlerList
from jobs.api.schemas.runs import Run, TaskInput
from jobs.core import dbclock
from jobs.forms import TaskForm
from jobs.handlers import registry
from jobs.serializers import handler_to_dict, run_to_dict

router = Router()


@router.get(
    "/handlers",
    operation_id="listHandlers",
    url_name="handlers",
    summary="Registered Python handlers (what the job form offers).",
    response={200: HandlerList, 401: Error},
)
def handlers(request):
    return JsonResponse({"results": [handler_to_dict(info) for info in registry.available()]})


@router.post(
    "/tasks",
    operation_id="enqueueTask",
    url_name="tasks",
    summary="Enqueue a one-off task (editor everywhere; refused in demo mode).",
    description="A live task with the same handler and key is the answer instead (200, not 201).",
    response={201: Run, 200: Run, **EDIT_ERRORS},
)
def enqueue_task(request, payload: TaskInput):
    # A task belongs to no namespace: an editor's everywhere.
    access.require(request.user, access.EDIT, namespace=None)
    refusals.check_demo_mode("enqueuing tasks")
    data = payload.model_dump(exclude_none=True)
    form = TaskForm(data)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    now = dbclock.write_time()
    (run,) = tasks.enqueue_many([form.task_request()], now=now)
    return JsonResponse(run_to_dict(run), status=201 if run.created_at == now else 200)
