"""Cronboard's management commands (commands/), and what several of them share."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils.translation import gettext as _


def user_named(name: str):
    """The user a command names, or a CommandError that says there is none."""
    try:
        return get_user_model().objects.get_by_natural_key(name)
    except get_user_model().DoesNotExist:
        raise CommandError(_("No user “{name}”.").format(name=name)) from None
