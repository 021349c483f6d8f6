"""Concurrency pools as people and programs change them: create or resize
(`save_pool`), delete (`delete_pool`, refused while a job names the pool),
each audited and for administrators only. How a pool limits runs is
jobs.admission's."""

import re

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from jobs import audit, text
from jobs.admission import load as admitted_load
from jobs.core.wakeup import wake_schedulers
from jobs.models import MAX_POOL_SIZE, POOL_NAME_PATTERN, AuditEvent, Job, Pool
from jobs.refusals import CodedRefusal, ServiceError, require_admin

# The errors' codes (docs/api.md): a size out of range, a name that is not
# one, a pool still in use, a job naming a pool that does not exist.
CODE_POOL_SIZE = "47020"
CODE_POOL_NAME = "47021"
CODE_POOL_IN_USE = "47022"
CODE_UNKNOWN_POOL = "47023"

NAME_RE = re.compile(rf"{POOL_NAME_PATTERN}\Z")


class PoolRefused(CodedRefusal):
    """A pool change that is not allowed."""


def _check_may_change(user) -> None:
    require_admin(user, gettext_noop("change concurrency pools"))


def check_size(size) -> int:
    """A pool's size: a whole number from 1 to MAX_POOL_SIZE (47020)."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_POOL_SIZE:
        raise PoolRefused(
            _("A pool's size is a whole number from 1 to {max_size:,}.").format(max_size=MAX_POOL_SIZE),
            code=CODE_POOL_SIZE,
            field="size",
        )
    return size


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise PoolRefused(
            _(
                "A pool's name is up to 100 lower-case letters, digits, “-” and “_”, starting with a letter or digit."
            ),
            code=CODE_POOL_NAME,
            field="name",
        )
    return name


def save_pool(
    *, name: str, size, description: str = "", user=None, via: str = AuditEvent.Via.CONSOLE
) -> Pool:
    """Create the pool or change its size and description. A smaller size
    stops admitting until the pool's live runs fall below it; none is cut short."""
    _check_may_change(user)
    name, size = check_name(name), check_size(size)
    description = description or ""
    if problem := text.find_unstorable(description):
        raise PoolRefused(
            _("Contains {problem}, which cannot be stored.").format(problem=problem),
            code=text.CODE,
            field="description",
        )
    description = description[: Pool._meta.get_field("description").max_length]
    now = timezone.now()
    for _attempt in range(2):
        try:
            with transaction.atomic():
                pool = Pool.objects.select_for_update().filter(name=name).first()
                if pool is None:
                    pool = Pool.objects.create(name=name, size=size, description=description, created_at=now)
                    changes = {"size": [None, size]}
                else:
                    changes = {"size": [pool.size, size]} if pool.size != size else {}
                    pool.size, pool.description, pool.updated_at = size, description, now
                    pool.save(update_fields=["size", "description", "updated_at"])
                audit.record(
                    action="pool-save",
                    subject=AuditEvent.Subject.POOL,
                    user=user,
                    via=via,
                    changes={"pool": [None, name], **changes},
                )
        except IntegrityError:
            continue  # created by another request meanwhile: update it
        wake_schedulers()  # a larger pool admits at once
        return pool
    raise ServiceError(_("The pool “{name}” was being changed; try again.").format(name=name))


def delete_pool(*, name: str, user=None, via: str = AuditEvent.Via.CONSOLE) -> bool:
    """Delete a pool no job names (47022 otherwise); False if there was none."""
    _check_may_change(user)
    with transaction.atomic():
        users = list(
            Job.objects.live()
            .filter(pool=name)
            .order_by("name")
            .values_list("name", flat=True)[: text.SHOWN_NAMES + 1]
        )
        if users:
            raise PoolRefused(
                _("The pool “{name}” is used by {jobs}: move them to another pool or none first.").format(
                    name=name, jobs=text.first_names(users)
                ),
                code=CODE_POOL_IN_USE,
                field="name",
            )
        deleted, _rows = Pool.objects.filter(name=name).delete()
        if deleted:
            audit.record(
                action="pool-delete",
                subject=AuditEvent.Subject.POOL,
                user=user,
                via=via,
                changes={"pool": [name, None]},
            )
    return bool(deleted)


def pool_rows() -> list[dict]:
    """Every pool with its size, its admitted and waiting runs and its jobs' count."""
    counts = admitted_load()
    jobs_by_pool: dict[str, int] = {}
    for name in Job.objects.live().exclude(pool="").values_list("pool", flat=True):
        jobs_by_pool[name] = jobs_by_pool.get(name, 0) + 1
    return [
        {
            "name": pool.name,
            "size": pool.size,
            "description": pool.description,
            "live": counts.pools[pool.name],
            "jobs": jobs_by_pool.get(pool.name, 0),
        }
        for pool in Pool.objects.all()
    ]
