"""Which language a page, an email or a channel message is written in.

Pages: the signed-in user's saved choice (Profile.language), else the
language cookie that Django's set_language writes, else Accept-Language
(LocaleMiddleware). Alerts go to people without a session, so they follow
the config centre's `sys.ui.language` instead (`alert_language`)."""

from contextlib import contextmanager
from functools import lru_cache

from django.conf import settings
from django.http import HttpResponseBadRequest
from django.utils import translation
from django.views.decorators.http import require_POST
from django.views.i18n import set_language as django_set_language

from jobs import cron

LANGUAGE_CODES = tuple(code for code, _name in settings.LANGUAGES)


def saved_language(user) -> str:
    """The user's own choice, or "" (follow the browser)."""
    if not getattr(user, "is_authenticated", False):
        return ""
    from jobs.models import Profile

    return Profile.objects.filter(user=user).values_list("language", flat=True).first() or ""


class UserLanguageMiddleware:
    """After AuthenticationMiddleware: a saved choice beats cookie and header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        language = saved_language(request.user)
        if language in LANGUAGE_CODES:
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        return self.get_response(request)


@require_POST
def set_language(request):
    """The header's switcher: Django's set_language (the cookie, the redirect
    back to `next`), and for a signed-in user the choice saved on their profile."""
    language = request.POST.get("language", "")
    if language not in LANGUAGE_CODES:
        return HttpResponseBadRequest("Unknown language.")
    response = django_set_language(request)
    if request.user.is_authenticated:
        from jobs.models import Profile

        Profile.objects.update_or_create(user=request.user, defaults={"language": language})
    return response


def alert_language() -> str:
    """The language of alert emails and channel messages (sys.ui.language)."""
    from jobs.config import get_setting

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


def describe_cron(expr: str) -> str:
    return _described(expr, translation.get_language() or "")


@lru_cache(maxsize=4096)
def _described(expr: str, language: str) -> str:
    """cron-descriptor builds a describer, and loads its catalog, for every
    call: a job list describes each of its rows. Keyed on the language that
    is active (the one the text is in); expressions are at most
    cron.MAX_EXPRESSION_CHARS long, and an invalid one raises, uncached."""
    return cron.describe(expr, locale=cron_locale(), translate=translation.gettext)


def localized_preview(expr: str, tz_name: str, **kwargs) -> dict:
    return cron.preview(expr, tz_name, locale=cron_locale(), translate=translation.gettext, **kwargs)


def activate_for_people_without_a_session() -> None:
    """Management commands an operator reads (jobs, bootstrap, health,
    runscheduler) speak sys.ui.language, as alerts do; English while the
    database cannot say (no tables yet, no connection)."""
    from django.db import DatabaseError

    try:
        translation.activate(alert_language())
    except DatabaseError:
        translation.activate(settings.LANGUAGE_CODE)
