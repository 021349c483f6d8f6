"""Who may see and change what. Views and the API decide access only
through these helpers."""

from django.http import Http404

from jobs.models import Job


def can_view(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def can_edit(user) -> bool:
    """Staff create, edit, run, pause; other signed-in users only view."""
    return can_view(user) and (user.is_staff or user.is_superuser)


def visible_jobs(user):
    """The live jobs `user` may see."""
    if not can_view(user):
        return Job.objects.none()
    return Job.objects.live()


def get_job_for_user(user, job_id) -> Job:
    """The live job with this id, if `user` may see it; else 404."""
    try:
        return visible_jobs(user).get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No such job.") from None
