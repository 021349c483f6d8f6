"""The language and the time zone of a page. Language: the signed-in user's
saved choice (Profile.language), else the language cookie that Django's
set_language writes, else Accept-Language (LocaleMiddleware); the header's
switcher posts to `set_language`. Time zone: the user's (Profile.time_zone,
sent by the browser at the first sign-in, changed on the profile page), or
UTC while they ask for UTC (the top bar's switch) or have none yet. Both are
read in one query per request."""

from django.contrib import messages
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect
from django.utils import timezone, translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django.views.i18n import set_language as django_set_language

from jobs import cron
from jobs.access import login_required
from jobs.config import LANGUAGE_CODES
from jobs.i18n import cron_error_message
from jobs.models import Profile


def saved_preferences(user) -> tuple[str, str, bool]:
    """(language or "" to follow the browser, time zone name or "", times in UTC)."""
    if not getattr(user, "is_authenticated", False):
        return "", "", False
    row = Profile.objects.filter(user=user).values_list("language", "time_zone", "times_in_utc").first()
    return row or ("", "", False)


def viewer_zone(zone_name: str, utc: bool):
    """The zone a page shows times in: UTC when asked for, or when the
    saved name is empty or no longer known to this system."""
    if utc or not zone_name:
        return cron.get_zone("UTC")
    try:
        return cron.get_zone(zone_name)
    except cron.CronError:
        return cron.get_zone("UTC")


class UserPreferencesMiddleware:
    """After AuthenticationMiddleware: a saved language beats cookie and
    header; the saved time zone is the page's current one (Django's `date`
    filter and the console's `when` render in it)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        language, zone_name, utc = saved_preferences(request.user)
        if language in LANGUAGE_CODES:
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        request.time_zone_name, request.times_in_utc = zone_name, utc
        timezone.activate(viewer_zone(zone_name, utc))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def browser_zone(text) -> str:
    """A zone name the browser sent (Intl's resolvedOptions().timeZone), as
    jobs.cron spells it, or "" for anything it does not know."""
    try:
        return cron.zone_name(text) if isinstance(text, str) and text.strip() else ""
    except cron.CronError:
        return ""


@require_POST
def set_language(request):
    """The header's switcher: Django's set_language (the cookie, the redirect
    back to `next`), and for a signed-in user the choice saved on their profile."""
    language = request.POST.get("language", "")
    if language not in LANGUAGE_CODES:
        return HttpResponseBadRequest("Unknown language.")
    response = django_set_language(request)
    if request.user.is_authenticated:
        Profile.objects.update_or_create(user=request.user, defaults={"language": language})
    return response


@login_required
@require_POST
def set_time_zone(request):
    """The profile's time zone (`time_zone`, an IANA name) or the top bar's
    one-click switch (`utc`: "on" shows every time in UTC, "off" in the
    zone again); back to `next`. An unknown zone changes nothing and says so."""
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/"
    profile, _created = Profile.objects.get_or_create(user=request.user)
    if "time_zone" in request.POST:
        try:
            profile.time_zone = cron.zone_name(request.POST["time_zone"])
        except cron.CronError as exc:
            messages.error(request, f"{exc.code} {cron_error_message(exc)}")
            return redirect(back)
        profile.times_in_utc = False
        messages.success(request, _("Times are shown in {zone}.").format(zone=profile.time_zone))
    elif request.POST.get("utc") in ("on", "off"):
        profile.times_in_utc = request.POST["utc"] == "on"
    else:
        return HttpResponseBadRequest("Nothing to change.")
    profile.save(update_fields=["time_zone", "times_in_utc"])
    return redirect(back)
