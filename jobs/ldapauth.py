"""Signing in through an LDAP directory or Active Directory (django-auth-ldap,
configured by config/ldapsettings.py): the service account finds the user,
a bind as the user checks the password, and the user's groups set their
roles through jobs.rolemapping at every sign-in. `groups_of` reads the same
groups without signing in (`manage.py sso check`).

A directory that is down, slow or refuses the service account is not a wrong
password: the sign-in page says so (`directory_failed`), and the local
accounts, which Django's own backend checks first, keep working."""

import logging
from dataclasses import dataclass
from types import SimpleNamespace

import ldap
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django_auth_ldap.backend import LDAPBackend, _LDAPUser, ldap_error

from jobs import rolemapping
from jobs.models import GrantSource

logger = logging.getLogger(__name__)

# Where a sign-in request keeps the directory's error for the sign-in page.
REQUEST_ERROR = "cronboard_directory_error"


def _groups(ldap_user) -> list[str]:
    """The user's groups as the mapping reads them: each by its
    distinguished name and by its name (cn), so a rule may use either."""
    if getattr(settings, "AUTH_LDAP_GROUP_SEARCH", None) is None:
        return []
    return sorted(ldap_user.group_dns) + sorted(ldap_user.group_names)


def _remember_error(request, exception) -> None:
    if request is not None:
        setattr(request, REQUEST_ERROR, exception)


def directory_failed(request) -> bool:
    """Did the directory fail this request's sign-in (down, slow, refused
    the service account), rather than the password being wrong?"""
    return getattr(request, REQUEST_ERROR, None) is not None


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend, with the group mapping applied at every
    sign-in. Users are created at their first sign-in with an unusable
    password (Cronboard never holds a directory user's password). A local
    account (one with a Cronboard password) of the same name, in any case,
    is never signed in by the directory: a directory entry named like the
    local `admin` must not become it."""

    def get_or_build_user(self, username, ldap_user):
        model = self.get_user_model()
        found = model._default_manager.filter(**{f"{model.USERNAME_FIELD}__iexact": username}).first()
        if found is not None and (
            found.has_usable_password() or not rolemapping.may_sign_in(found, GrantSource.LDAP)
        ):
            logger.warning(
                "LDAP: %s is another source's account; the directory does not sign it in", username
            )
            # Django's authenticate() stops at PermissionDenied: a failed sign-in.
            raise PermissionDenied("an account of this name is not the directory's")
        return super().get_or_build_user(username, ldap_user)

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            return None
        try:
            groups = _groups(user.ldap_user)
        except ldap.LDAPError as exc:
            logger.warning("LDAP: reading the groups of %s failed: %s", user.get_username(), exc)
            _remember_error(request, exc)
            return None
        if not rolemapping.claim_source(user, GrantSource.LDAP):
            return None
        rolemapping.apply_group_mapping(user, groups, source=GrantSource.LDAP, request=request)
        return user


def _on_ldap_error(sender, context, user, request, exception, **kwargs):
    _remember_error(request, exception)


ldap_error.connect(_on_ldap_error, sender=DirectoryBackend, dispatch_uid="jobs.ldapauth.error")


@dataclass
class DirectoryEntry:
    dn: str
    groups: list[str]


def groups_of(username: str) -> DirectoryEntry | None:
    """The directory's entry for `username` and its groups, read with the
    service account as a sign-in would, without signing in or creating the
    user; None if the directory has no such user. ldap.LDAPError when it
    cannot be asked."""
    backend = DirectoryBackend()
    # The backend's own reader of one user: the search, the escaping and the
    # group type are exactly those of a sign-in. It reports a failed search
    # through ldap_error (to the "request" given) and answers "no such user".
    asked = SimpleNamespace()
    ldap_user = _LDAPUser(backend, username=backend.django_to_ldap_username(username.strip()), request=asked)
    dn = ldap_user.dn
    if directory_failed(asked):
        raise getattr(asked, REQUEST_ERROR)
    if dn is None:
        return None
    return DirectoryEntry(dn=dn, groups=_groups(ldap_user))
