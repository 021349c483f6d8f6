"""Named, expiring leases in the database.

`node:<worker id>` is held by each live scheduler process (identity and
liveness: the sweep leaves alone the runs of a worker that holds one);
`leader` is held by the one process that plans fires.

Clock: on PostgreSQL several hosts share the leases, so every lease time is
read from and written with the database's clock (`statement_timestamp()`),
never a host's: a host whose clock is off can neither keep a lease past its
expiry nor take a live one early. On SQLite there is one scheduler per
database (runscheduler's file lock), and the caller's `now` is used, which
lets tests drive leases with a fixed clock.

Epochs: every take (as opposed to a renewal) increments the lease's epoch, and
a holder renews only the epoch it took. The leader's fire claims carry its
epoch (`held()` inside the claim's UPDATE), so a leader that stalled past its
lease, or a second process started under the same worker id, claims nothing.

What a scheduler does with its leases (taking the leader lease, renewing its
node lease, proving its identity) is jobs.engine.leadership; what the
cluster page shows of them, jobs.cluster.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists
from django.db.models.functions import Now

from jobs.cluster import (
    clock_for,
)
from jobs.models import Lease


def lease_ttl() -> timedelta:
    """How long a lease holds without renewal (JOBS_LEASE_TTL_SECONDS)."""
    return timedelta(seconds=settings.JOBS_LEASE_TTL_SECONDS)


def renew_period() -> timedelta:
    """How often a holder renews its leases (JOBS_LEASE_RENEW_SECONDS, less than the TTL)."""
    return timedelta(seconds=settings.JOBS_LEASE_RENEW_SECONDS)


@dataclass(frozen=True)
class Grant:
    epoch: int
    expires_at: datetime
    acquired_at: datetime
    taken: bool  # this call took the lease (a new epoch) rather than renewing it


def acquire(
    name: str,
    holder: str,
    *,
    now: datetime,
    epoch: int | None = None,
    ttl: timedelta | None = None,
    info: dict | None = None,
) -> Grant | None:
    """Renew the lease if `holder` holds it at `epoch`; else take it, with a
    new epoch, when it is free or expired, or when it is held under our own
    worker id and we never held it (`epoch` None: a process that died under
    this id; runscheduler checked it is gone). None while another holds it,
    including another process of ours that took it over since `epoch`.
    `ttl` defaults to lease_ttl()."""
    ttl = lease_ttl() if ttl is None else ttl
    safe_create(name)
    with transaction.atomic():
        lease, clock = _locked(name, now)
        ours = lease.holder == holder and (epoch is None or lease.epoch == epoch)
        if lease.is_live(clock) and not ours:
            return None
        renewing = ours and epoch is not None and lease.is_live(clock)
        if not renewing:
            lease.epoch += 1
            lease.acquired_at = clock
        lease.holder = holder
        lease.expires_at = clock + ttl
        lease.renewed_at = clock
        fields = ["holder", "expires_at", "renewed_at", "epoch", "acquired_at"]
        if info is not None:
            lease.info = info
            fields.append("info")
        lease.save(update_fields=fields)
    return Grant(
        epoch=lease.epoch, expires_at=lease.expires_at, acquired_at=lease.acquired_at, taken=not renewing
    )


def release(name: str, holder: str, *, epoch: int | None = None) -> None:
    mine = Lease.objects.filter(name=name, holder=holder)
    if epoch is not None:
        mine = mine.filter(epoch=epoch)
    mine.update(holder="", expires_at=None)


def held(name: str, holder: str, epoch: int, *, now: datetime):
    """A condition, true while `holder` holds `name` at `epoch`. On PostgreSQL
    it is judged by the database clock of the very statement that uses it: a
    claim filtered on it cannot succeed after the lease lapsed, however long
    the claimer stalled between deciding and claiming."""
    return Exists(holding(name, holder, epoch, now=now))


def holds(name: str, holder: str, epoch: int, *, now: datetime) -> bool:
    return holding(name, holder, epoch, now=now).exists()


def safe_create(name: str) -> None:
    try:
        with transaction.atomic():
            Lease.objects.get_or_create(name=name)
    except IntegrityError:
        pass


def _locked(name: str, now: datetime) -> tuple[Lease, datetime]:
    """The lease row, locked until the transaction ends, and the time to judge
    it by: the database's clock on PostgreSQL, the caller's on SQLite (whose
    IMMEDIATE transactions already lock the whole database)."""
    qs = Lease.objects.select_for_update().filter(name=name)
    if connection.vendor == "postgresql":
        lease = qs.annotate(db_now=Now()).get()
        return lease, lease.db_now
    return qs.get(), now


def holding(name: str, holder: str, epoch: int, *, now: datetime):
    """The lease row while `holder` holds `name` at `epoch` (see `held`)."""
    return Lease.objects.filter(name=name, holder=holder, epoch=epoch, expires_at__gt=clock_for(now))
