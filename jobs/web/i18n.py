"""The language of a page: the signed-in user's saved choice
(Profile.language), else the language cookie that Django's set_language
writes, else Accept-Language (LocaleMiddleware). The header's switcher
posts to `set_language`."""

from django.http import HttpResponseBadRequest
from django.utils import translation
from django.views.decorators.http import require_POST
from django.views.i18n import set_language as django_set_language

from jobs.config import LANGUAGE_CODES
from jobs.models import Profile


def saved_language(user) -> str:
    """The user's own choice, or "" (follow the browser)."""
    if not getattr(user, "is_authenticated", False):
        return ""
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
        Profile.objects.update_or_create(user=request.user, defaults={"language": language})
    return response
