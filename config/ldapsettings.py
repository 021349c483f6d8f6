"""django-auth-ldap's settings (AUTH_LDAP_*) made from the LDAP_* values that
config/settings.py reads from the environment (docs/operations.md, "LDAP and
Active Directory"). Imported only when LDAP_SERVER_URI is set: python-ldap
is loaded by no process of an installation without a directory."""

from pathlib import Path

import ldap
from django.core.exceptions import ImproperlyConfigured
from django_auth_ldap import config as auth_ldap

# LDAP_GROUP_TYPE: how the directory writes its groups, and the filter that
# finds them under LDAP_GROUP_SEARCH_BASE.
GROUP_TYPES = {
    "groupOfNames": (auth_ldap.GroupOfNamesType, "(objectClass=groupOfNames)"),
    "nestedGroupOfNames": (auth_ldap.NestedGroupOfNamesType, "(objectClass=groupOfNames)"),
    "groupOfUniqueNames": (auth_ldap.GroupOfUniqueNamesType, "(objectClass=groupOfUniqueNames)"),
    "posixGroup": (auth_ldap.PosixGroupType, "(objectClass=posixGroup)"),
    "activeDirectory": (auth_ldap.ActiveDirectoryGroupType, "(objectClass=group)"),
    "nestedActiveDirectory": (auth_ldap.NestedActiveDirectoryGroupType, "(objectClass=group)"),
}


def auth_ldap_settings(
    *,
    server_uri: str,
    bind_dn: str,
    bind_password: str,
    user_search_base: str,
    user_filter: str,
    group_search_base: str,
    group_type: str,
    group_filter: str,
    start_tls: bool,
    ca_file: str,
    timeout: float,
) -> dict:
    """The AUTH_LDAP_* settings; ImproperlyConfigured names the LDAP_*
    variable that is wrong."""
    uri = server_uri.strip()
    if not all(part.strip().lower().startswith(("ldap://", "ldaps://")) for part in uri.split()):
        raise ImproperlyConfigured(
            f"LDAP_SERVER_URI must be ldap://HOST[:PORT] or ldaps://HOST[:PORT] (several separated by spaces), "
            f"got {uri!r}"
        )
    if start_tls and "ldaps://" in uri.lower():
        raise ImproperlyConfigured(
            "LDAP_START_TLS: ldaps:// is encrypted from the start; use either ldaps:// or StartTLS on ldap://"
        )
    if not user_search_base.strip():
        raise ImproperlyConfigured(
            "LDAP_USER_SEARCH_BASE must name where the users are, such as ou=people,dc=example,dc=com"
        )
    if "%(user)s" not in user_filter:
        raise ImproperlyConfigured(
            f"LDAP_USER_FILTER must contain %(user)s where the name typed goes, such as (uid=%(user)s); "
            f"got {user_filter!r}"
        )
    if group_type not in GROUP_TYPES:
        raise ImproperlyConfigured(
            f"LDAP_GROUP_TYPE must be one of {', '.join(GROUP_TYPES)}, got {group_type!r}"
        )
    if ca_file and not Path(ca_file).is_file():
        raise ImproperlyConfigured(f"LDAP_CA_FILE: no such file: {ca_file}")
    group_class, default_group_filter = GROUP_TYPES[group_type]
    options = {
        # Seconds to connect, and to wait for each answer: a directory that
        # is down or hangs fails the sign-in with a message, not a stuck worker.
        ldap.OPT_NETWORK_TIMEOUT: timeout,
        ldap.OPT_TIMEOUT: timeout,
        # Active Directory answers searches at the domain's root with
        # referrals the service account cannot follow.
        ldap.OPT_REFERRALS: 0,
        ldap.OPT_X_TLS_REQUIRE_CERT: ldap.OPT_X_TLS_DEMAND,
    }
    if ca_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = ca_file
    # Last: makes the TLS options above take effect for this connection.
    options[ldap.OPT_X_TLS_NEWCTX] = 0
    values = {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_START_TLS": start_tls,
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        # LDAPSearch escapes the name typed into the filter (RFC 4515), so
        # `*)(uid=*` finds no one.
        "AUTH_LDAP_USER_SEARCH": auth_ldap.LDAPSearch(user_search_base, ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        # Roles come from jobs.rolemapping, not from Django permissions.
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_CACHE_TIMEOUT": 0,
    }
    if group_search_base.strip():
        values["AUTH_LDAP_GROUP_SEARCH"] = auth_ldap.LDAPSearch(
            group_search_base, ldap.SCOPE_SUBTREE, group_filter or default_group_filter
        )
        values["AUTH_LDAP_GROUP_TYPE"] = group_class()
    return values
