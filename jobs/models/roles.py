"""Roles: who may do what, everywhere or in one namespace (jobs.access
decides from these rows)."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """In rising order: each role may do what the ones before it may."""

    VIEWER = "viewer", _("viewer")
    OPERATOR = "operator", _("operator")
    EDITOR = "editor", _("editor")
    ADMIN = "admin", _("admin")


ROLE_ORDER = [Role.VIEWER, Role.OPERATOR, Role.EDITOR, Role.ADMIN]


class GrantSource(models.TextChoices):
    """Who keeps a grant: an administrator by hand (the roles command, the
    admin), or a sign-in through a directory or an identity provider, which
    makes the user's grants of its source match the group mapping each time
    (jobs.rolemapping) and never touches the others."""

    MANUAL = "", _("by hand")
    LDAP = "ldap", _("LDAP")
    OIDC = "oidc", _("OpenID Connect")


class RoleGrant(models.Model):
    """One role for one user or one Django group (what an SSO group mapping
    fills), everywhere (namespace NULL) or in one namespace ("" is the jobs
    outside any namespace). A user's roles are their own grants and their
    groups' grants; the highest that applies wins."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="role_grants"
    )
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="role_grants"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    # NULL is everywhere; "" is the jobs outside any namespace, as on Job.
    namespace = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    # A row written without it (raw SQL, an older process during an upgrade)
    # is a grant by hand, which no sign-in removes.
    source = models.CharField(
        max_length=10,
        choices=GrantSource.choices,
        default=GrantSource.MANUAL,
        db_default=GrantSource.MANUAL,
        blank=True,
    )

    class Meta:
        constraints = [
            # jobs.access reads a grant as the user's or the group's: exactly one.
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(group__isnull=True))
                | (Q(user__isnull=True) & Q(group__isnull=False)),
                name="rolegrant_user_or_group",
            ),
            models.CheckConstraint(
                condition=Q(role__in=[r.value for r in Role]), name="rolegrant_role_valid"
            ),
            # One grant per holder and scope: granting again replaces the role
            # (jobs.access.grant_role relies on it).
            models.UniqueConstraint(
                fields=["user", "namespace"], condition=Q(user__isnull=False), name="rolegrant_user_scope"
            ),
            models.UniqueConstraint(
                fields=["user"],
                condition=Q(user__isnull=False, namespace__isnull=True),
                name="rolegrant_user_global",
            ),
            models.UniqueConstraint(
                fields=["group", "namespace"], condition=Q(group__isnull=False), name="rolegrant_group_scope"
            ),
            models.UniqueConstraint(
                fields=["group"],
                condition=Q(group__isnull=False, namespace__isnull=True),
                name="rolegrant_group_global",
            ),
        ]

    def __str__(self):
        holder = self.user or self.group
        where = "everywhere" if self.namespace is None else f"namespace “{self.namespace}”"
        return f"{holder}: {self.role} {where}"
