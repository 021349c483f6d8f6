"""Who may read /metrics, on a scheduler's own server and on the web
process alike: a bearer token equal to JOBS_METRICS_TOKEN, or a client
address inside JOBS_METRICS_ALLOW. With neither set nobody may: metrics name
jobs and namespaces, so they are never public by default."""

import hmac
import ipaddress
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Refusal:
    status: int  # 401: a token would do; 403: nothing this client sends would
    reason: str


def refusal(*, authorization: str | None, client: str | None) -> Refusal | None:
    """None when the scrape may go on, else why not."""
    token = settings.JOBS_METRICS_TOKEN
    scheme, _, sent = (authorization or "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode()):
        return None
    if client and _allowed_address(client):
        return None
    if token:
        return Refusal(401, "a bearer token (JOBS_METRICS_TOKEN) is required")
    if settings.JOBS_METRICS_ALLOW:
        return Refusal(403, "this address is not in JOBS_METRICS_ALLOW")
    return Refusal(403, "metrics are off for everyone: set JOBS_METRICS_TOKEN or JOBS_METRICS_ALLOW")


def _allowed_address(client: str) -> bool:
    try:
        address = ipaddress.ip_address(client.split("%", 1)[0])
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(cidr, strict=False) for cidr in settings.JOBS_METRICS_ALLOW)
