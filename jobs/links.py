"""Links to console pages that leave the site (emails, in-site messages):
built here, in one place, from CRONBOARD_BASE_URL."""

from urllib.parse import urlsplit

from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


def job_path(job_id: int) -> str:
    """The console's page for one job."""
    return f"/jobs/{job_id}/"


def absolute(path: str) -> str:
    return f"{settings.CRONBOARD_BASE_URL}{path}"


def job_url(job_id: int) -> str:
    return absolute(job_path(job_id))


def origin(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an http(s) URL, the port spelled out even when
    it is the scheme's default; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def base_url_mismatch(opened_at: str) -> str | None:
    """The origin a page was opened at (`request.build_absolute_uri()`) when
    it is not CRONBOARD_BASE_URL's: links in alerts would then lead people
    somewhere else. None when they agree (or the address cannot be read)."""
    here = origin(opened_at)
    if here is None or here == origin(settings.CRONBOARD_BASE_URL):
        return None
    scheme, host, port = here
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if port == DEFAULT_PORTS[scheme] else f":{port}")
