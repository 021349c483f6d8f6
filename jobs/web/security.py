"""Facts about a request that depend on how Cronboard is deployed."""

from django.conf import settings


def client_ip(request) -> str | None:
    """The client's address, for login throttling.

    Without a proxy it is REMOTE_ADDR. Behind CRONBOARD_PROXY_COUNT proxies
    it is the X-Forwarded-For entry that many places from the right: those
    entries were appended by our own proxies, anything left of them was
    sent by the client and could be forged."""
    remote = request.META.get("REMOTE_ADDR") or None
    hops = getattr(settings, "CRONBOARD_PROXY_COUNT", 0)
    if hops <= 0:
        return remote
    forwarded = [
        part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()
    ]
    if len(forwarded) < hops:
        return remote
    return forwarded[-hops]
