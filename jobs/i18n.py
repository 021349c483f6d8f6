"""Which language an email, a channel message or a command's output is
written in, and the cron texts in the active language. The languages are
settings.LANGUAGES (jobs.config.LANGUAGE_CODES). Alerts go to people without a session,
so they follow the config centre's `sys.ui.language` (`alert_language`);
pages follow each user's choice (jobs.web.i18n)."""

from contextlib import contextmanager
from functools import lru_cache

from django.conf import settings
from django.utils import translation

from jobs import cron
from jobs.config import LANGUAGE_CODES, get_setting


def alert_language() -> str:
    """The language of alert emails and channel messages (sys.ui.language)."""
    language = get_setting("sys.ui.language")
    return language if language in LANGUAGE_CODES else settings.LANGUAGE_CODE


@contextmanager
def alert_translation():
    """Render an alert (subject, body, channel text) in alert_language()."""
    with translation.override(alert_language()):
        yield


# cron-descriptor's locale for each console language (jobs.cron is Django-free:
# it is handed the locale and gettext).
CRON_LOCALES = {"en": "en_US", "zh-hans": "zh_CN"}


def cron_locale() -> str:
    return CRON_LOCALES.get(translation.get_language() or "", "en_US")


def cron_error_message(exc) -> str:
    """A CronError's message in the active language (its code is unchanged)."""
    params = {
        key: translation.gettext(value) if key in cron.TRANSLATED_PARAMS and isinstance(value, str) else value
        for key, value in exc.params.items()
    }
    template = translation.gettext(exc.template)
    try:
        return template.format(**params) if params else template
    except (KeyError, IndexError, ValueError):
        # A catalog entry that lost a placeholder must not turn an error page into a 500.
        return exc.message


def describe_cron(expr: str, seed: str = "") -> str:
    """An expression in words; `seed` (the job's name) picks what H stands for."""
    return _described(expr, translation.get_language() or "", seed if "H" in expr else "")


@lru_cache(maxsize=4096)
def _described(expr: str, language: str, seed: str = "") -> str:
    """cron-descriptor builds a describer, and loads its catalog, for every
    call: a job list describes each of its rows. Keyed on the language that
    is active (the one the text is in) and, for an expression with H, the
    job's name; expressions are at most cron.MAX_EXPRESSION_CHARS long, and
    an invalid one raises, uncached."""
    return cron.describe(expr, locale=cron_locale(), translate=translation.gettext, seed=seed)


def localized_preview(expr: str, tz_name: str, **kwargs) -> dict:
    return cron.preview(expr, tz_name, locale=cron_locale(), translate=translation.gettext, **kwargs)


def localized_dst_effect(expr: str, tz_name: str, **kwargs) -> str | None:
    return cron.next_dst_effect(expr, tz_name, translate=translation.gettext, **kwargs)


def activate_for_people_without_a_session() -> None:
    """Management commands an operator reads (jobs, bootstrap, health,
    runscheduler) speak sys.ui.language, as alerts do; English while the
    database cannot say (no tables yet, no connection)."""
    from django.db import DatabaseError

    try:
        translation.activate(alert_language())
    except DatabaseError:
        translation.activate(settings.LANGUAGE_CODE)
