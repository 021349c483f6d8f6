"""Named, expiring leases in the database.

`node:<worker id>` is held by each live scheduler process (identity and
liveness: the sweep leaves alone the runs of a worker that holds one);
`leader` is held by the one process that plans fires.
"""

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Q

from jobs.models import Lease

NODE_PREFIX = "node:"
LEADER = "leader"
TTL = timedelta(seconds=30)
RENEW_EVERY = timedelta(seconds=10)


def node_lease_name(worker_id: str) -> str:
    return f"{NODE_PREFIX}{worker_id}"


def acquire(name: str, holder: str, *, now: datetime, ttl: timedelta = TTL, info: dict | None = None) -> int | None:
    """Renew the lease if we hold it, else take it if it is free or expired.
    Returns its epoch (incremented on every take, including retaking our own
    lapsed lease) or None when another holder has it."""
    safe_create(name)
    expires = now + ttl
    extra = {"info": info} if info is not None else {}
    ours = Lease.objects.filter(name=name, holder=holder, expires_at__gte=now)
    if not ours.update(expires_at=expires, renewed_at=now, **extra):
        free = Lease.objects.filter(Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now), name=name)
        if not free.update(
            holder=holder, expires_at=expires, acquired_at=now, renewed_at=now, epoch=F("epoch") + 1, **extra
        ):
            return None
    return Lease.objects.filter(name=name).values_list("epoch", flat=True).get()


def release(name: str, holder: str) -> None:
    Lease.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)


def live_node_holders(*, now: datetime) -> set[str]:
    return set(
        Lease.objects.filter(name__startswith=NODE_PREFIX, expires_at__gte=now).values_list("holder", flat=True)
    )


def safe_create(name: str) -> None:
    try:
        with transaction.atomic():
            Lease.objects.get_or_create(name=name)
    except IntegrityError:
        pass
