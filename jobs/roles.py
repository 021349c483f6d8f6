"""Granting and revoking roles (jobs.models.RoleGrant): the one place such
rows are written, by the roles command, the admin and the tests alike.
Each change is audited under the subject "roles"."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.translation import gettext as _

from jobs import audit
from jobs.models import AuditEvent, GrantSource, Role, RoleGrant


def where(namespace: str | None) -> str:
    """Where a grant applies, in words: everywhere (None), outside any
    namespace (""), or in one."""
    if namespace is None:
        return _("everywhere")
    return (
        _("in namespace “{namespace}”").format(namespace=namespace)
        if namespace
        else _("outside any namespace")
    )


def _holder(user, group) -> dict:
    if (user is None) == (group is None):
        raise ValueError("Grant to a user or to a group.")
    return {"user": user} if user is not None else {"group": group}


def _holder_name(user, group) -> str:
    return user.get_username() if user is not None else f"group {group.name}"


def _label(user, group, namespace) -> dict:
    return {"holder": _holder_name(user, group), "namespace": namespace}


def grant_role(
    *, role: str, namespace: str | None = None, user=None, group: Group | None = None, by=None, via: str
) -> RoleGrant:
    """Give `user` (or `group`) `role` everywhere (namespace None) or in
    `namespace`; a role held there already is replaced. A grant given here
    is given by hand: one a directory's sign-in kept becomes the
    administrator's, which sign-ins no longer change (jobs.rolemapping)."""
    role = Role(role)
    holder = _holder(user, group)
    with transaction.atomic():
        existing = RoleGrant.objects.select_for_update().filter(namespace=namespace, **holder).first()
        if existing is not None and existing.role == role and existing.source == GrantSource.MANUAL:
            return existing
        before = existing.role if existing is not None else None
        grant, _created = RoleGrant.objects.update_or_create(
            namespace=namespace, **holder, defaults={"role": role, "source": GrantSource.MANUAL}
        )
        changes = {**_label(user, group, namespace), "role": [before, role.value]}
        if existing is not None and existing.source != GrantSource.MANUAL:
            changes["source"] = [existing.source, GrantSource.MANUAL.value]
        audit.record(
            action="grant",
            subject=AuditEvent.Subject.ROLES,
            subject_name=_holder_name(user, group),
            user=by,
            via=via,
            changes=changes,
        )
    return grant


def revoke_role(
    *, namespace: str | None = None, user=None, group: Group | None = None, by=None, via: str
) -> bool:
    """Take away the role `user` (or `group`) holds everywhere (namespace
    None) or in `namespace`. False if there was none."""
    holder = _holder(user, group)
    with transaction.atomic():
        grant = RoleGrant.objects.select_for_update().filter(namespace=namespace, **holder).first()
        if grant is None:
            return False
        grant.delete()
        audit.record(
            action="revoke",
            subject=AuditEvent.Subject.ROLES,
            subject_name=_holder_name(user, group),
            user=by,
            via=via,
            changes={**_label(user, group, namespace), "role": [grant.role, None]},
        )
    return True


def grant_default_role(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    """post_save of the user model: a user created from now on holds
    CRONBOARD_DEFAULT_ROLE everywhere (none when it is empty; superusers
    may do everything without). Rows loaded as they are (loaddata) keep
    the grants they came with."""
    if not created or raw or instance.is_superuser or not settings.CRONBOARD_DEFAULT_ROLE:
        return
    grant_role(role=settings.CRONBOARD_DEFAULT_ROLE, user=instance, via=AuditEvent.Via.SYSTEM)
