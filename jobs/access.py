"""Who may see and change what. Views, the API and JobScope decide access
only through these helpers."""

from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db.models import Q
from django.http import Http404
from django.shortcuts import resolve_url
from django_htmx.http import HttpResponseClientRedirect

from jobs.models import Job, Run


def can_view(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def can_edit(user) -> bool:
    """Staff create, edit, run, pause; other signed-in users only view."""
    return can_view(user) and (user.is_staff or user.is_superuser)


def can_see_audit(user) -> bool:
    """The audit page across all jobs, settings and sign-ins: staff."""
    return can_edit(user)


def jobs_in_namespace(namespace: str | None):
    """Live jobs, limited to one namespace unless `namespace` is None. For
    trusted callers (JobScope, commands); people go through visible_jobs."""
    jobs = Job.objects.live()
    if namespace is not None:
        jobs = jobs.filter(namespace=namespace)
    return jobs


def visible_jobs(user, *, namespace: str | None = None):
    """The live jobs `user` may see, optionally only those in `namespace`
    ("" is the jobs outside any namespace)."""
    if not can_view(user):
        return Job.objects.none()
    return jobs_in_namespace(namespace)


def get_job_for_user(user, job_id, *, namespace: str | None = None) -> Job:
    """The live job with this id, if `user` may see it (and it is in
    `namespace`, when given); else 404."""
    try:
        return visible_jobs(user, namespace=namespace).get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job.") from None


def visible_runs(user):
    """Runs of the jobs `user` may see, and one-off tasks (which belong to no job)."""
    if not can_view(user):
        return Run.objects.none()
    return Run.objects.filter(Q(job__isnull=True) | Q(job__deleted_at__isnull=True))


def get_run_for_user(user, run_id) -> Run:
    try:
        return visible_runs(user).select_related("job").get(pk=int(run_id))
    except (Run.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such run.") from None


def login_required(view):
    """Django's login_required, except that an htmx request (a fragment whose
    session expired) is told to load the login page as a whole page instead
    of having the login form swapped into the fragment."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if can_view(request.user):
            return view(request, *args, **kwargs)
        if request.htmx:
            back = request.htmx.current_url_abs_path or request.get_full_path()
            login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': back})}"
            return HttpResponseClientRedirect(login_url)
        return redirect_to_login(request.get_full_path())

    return wrapper
