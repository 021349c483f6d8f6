"""Demo mode (DEMO_MODE): a public demo shows jobs and does not run them on
request. Read here and nowhere else; `refusals.check_demo_mode` and
`refusals.check_job_change` refuse what it turns off, the command handler
refuses to start a program, and the pages say it is on."""

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop


def is_on() -> bool:
    return bool(getattr(settings, "DEMO_MODE", False))


# The actions as messages name them (translated when the message is raised).
ACTION_WORDS = {
    "run now": gettext_noop("run now"),
    "enqueuing tasks": gettext_noop("enqueuing tasks"),
    "create or edit": gettext_noop("create or edit"),
    "resume": gettext_noop("resume"),
    "re-enable": gettext_noop("re-enable"),
    "pause": gettext_noop("pause"),
    "delete": gettext_noop("delete"),
    "override the properties of": gettext_noop("override the properties of"),
    "change secrets": gettext_noop("changing secrets"),
}


def refusal(action: str) -> str | None:
    """Why `action` is refused in demo mode, None when it is off."""
    if not is_on():
        return None
    return _("Demo mode: {action} is turned off on this server.").format(
        action=_(ACTION_WORDS.get(action, action))
    )
