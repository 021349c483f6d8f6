"""The API's reads across all the jobs a caller may see: every run, the
dashboard's figures (jobs.overview) and the fires of the next day or week
(jobs.upcoming)."""

from django.http import JsonResponse
from django.utils import timezone
from ninja import Query, Router

from jobs import access, cron, upcoming
from jobs.api.framework import ApiError
from jobs.api.queries import run_page
from jobs.api.schemas.base import ERRORS, Error
from jobs.api.schemas.overview import Dashboard, UpcomingPage, UpcomingQuery
from jobs.api.schemas.runs import AllRunFilters, RunPage
from jobs.overview import dashboard_figures
from jobs.serializers import run_to_dict

router = Router()


@router.get(
    "/runs",
    operation_id="listAllRuns",
    url_name="runs",
    summary="Runs across all jobs (and one-off tasks), newest scheduled first.",
    response={200: RunPage, **ERRORS},
)
def list_runs(request, filters: Query[AllRunFilters]):
    runs = access.visible_runs(request.user)
    if filters.job is not None:
        runs = runs.filter(job_id=filters.job)
    return run_page(runs, filters, masked=not access.sees_credentials(request.user))


@router.get(
    "/dashboard",
    operation_id="getDashboard",
    url_name="dashboard",
    summary="Jobs by state, the last 24 hours' runs by status and success rate, jobs needing attention, live runs.",
    response={200: Dashboard, 401: Error},
)
def dashboard(request):
    """The console dashboard's figures."""
    figures = dashboard_figures(request.user, now=timezone.now())
    return JsonResponse(
        {
            "jobs_by_state": figures["jobs_by_state"],
            "runs_24h_by_status": figures["runs_24h_by_status"],
            "success_rate_24h": figures["success_rate_24h"],
            "attention": [
                {
                    "id": job.pk,
                    "name": job.name,
                    "state": job.state,
                    "consecutive_failures": job.consecutive_failures,
                }
                for job in figures["attention"]
            ],
            "running": [
                run_to_dict(run, mask_credentials=not access.sees_credentials(request.user, run.job))
                for run in figures["running"]
            ],
            "running_count": figures["running_count"],
        }
    )


@router.get(
    "/upcoming",
    operation_id="listUpcomingFires",
    url_name="upcoming",
    summary="Fires of the next 24 hours or 7 days across jobs, earliest first.",
    response={200: UpcomingPage, **ERRORS},
)
def list_upcoming(request, query: Query[UpcomingQuery]):
    """Fires in the window across the jobs the caller may see, in time order (jobs.upcoming)."""
    after = None
    if query.cursor:
        after = upcoming.parse_cursor(query.cursor)
        if after is None:
            raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    now = timezone.now()
    page, more = upcoming.upcoming_fires(
        access.visible_jobs(request.user),
        start=now,
        end=now + upcoming.WINDOWS[query.window],
        limit=query.limit,
        after=after,
    )
    return JsonResponse(
        {
            "results": [
                {
                    "job": fire.job.pk,
                    "name": fire.job.name,
                    "at": cron.iso_utc(fire.at),
                    "local": fire.local.isoformat(),
                    "timezone": fire.job.timezone,
                    "dst": fire.dst,
                }
                for fire in page
            ],
            "next_cursor": upcoming.cursor_of(page[-1]) if more else None,
        }
    )
