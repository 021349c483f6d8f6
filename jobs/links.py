"""Links to console pages that leave the site (emails, in-site messages):
built here, in one place, from CRONBOARD_BASE_URL."""

from django.conf import settings


def job_path(job_id: int) -> str:
    """The console's page for one job."""
    return f"/jobs/{job_id}/"


def absolute(path: str) -> str:
    return f"{settings.CRONBOARD_BASE_URL}{path}"


def job_url(job_id: int) -> str:
    return absolute(job_path(job_id))
