"""Demo mode (DEMO_MODE): a public demo shows jobs and does not run them on
request. Read here and nowhere else; `refusals.check_demo_mode` and
`refusals.check_job_change` refuse what it turns off, the command handler
refuses to start a program, and the pages say it is on."""

from django.conf import settings
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

# The most often a schedule saved in demo mode may fire: a job firing every
# second fills the demo's history and the scheduler's time for every visitor.
MIN_PERIOD_SECONDS = 60


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
    "override the credentials of": gettext_noop("override the credentials of"),
    "cancel": gettext_noop("cancel runs of"),
    "acknowledge": gettext_noop("acknowledge the alerts of"),
    "running command jobs": gettext_noop("running command jobs"),
    "changing settings": gettext_noop("changing settings"),
    "changing alert channels": gettext_noop("changing alert channels"),
    "sending a test email": gettext_noop("sending a test email"),
    "sending a test message": gettext_noop("sending a test message"),
    "importing jobs": gettext_noop("importing jobs"),
    "resuming a paused job": gettext_noop("resuming a paused job"),
    "a schedule faster than once a minute": gettext_noop("a schedule faster than once a minute"),
    "change secrets": gettext_noop("changing secrets"),
}


def refusal(action: str) -> str | None:
    """Why `action` is refused in demo mode, None when it is off."""
    if not is_on():
        return None
    return disabled(_(ACTION_WORDS.get(action, action)))


def disabled(action: str) -> str:
    """Every demo-mode refusal's one sentence, for a translated `action`."""
    return _("{action} is disabled in demo mode.").format(action=capfirst(action))
