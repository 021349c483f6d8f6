"""The sign-in page: Django's LoginView, keeping the browser's time zone,
refusing an account that a
directory let in but whose groups map to no role (jobs.rolemapping) with a
page that says so instead of a session, and telling a directory that could
not be asked from a wrong password."""

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.shortcuts import render
from django.utils.translation import gettext as _

from jobs.models import GrantSource, Profile
from jobs.web.i18n import browser_zone

NO_ROLE = "no_role"
DIRECTORY_UNAVAILABLE = "directory_unavailable"


def no_role_response(request, *, source: str = ""):
    """The page (403) for a sign-in that left its user with no role; any
    sign-in door (the password form, an identity provider's callback) ends
    here instead of opening a session."""
    label = GrantSource(source).label if source else ""
    return render(request, "registration/no_role.html", {"source": label}, status=403)


def _directory_failed(request) -> bool:
    if not getattr(settings, "LDAP_SERVER_URI", ""):
        return False
    from jobs import ldapauth  # python-ldap only where a directory is configured

    return ldapauth.directory_failed(request)


class SignInForm(AuthenticationForm):
    def confirm_login_allowed(self, user):
        super().confirm_login_allowed(user)
        mapping = getattr(user, "cronboard_mapping", None)
        if mapping is not None and not mapping.has_role:
            self.refused_source = mapping.source
            raise ValidationError(_("Your account has no role in Cronboard."), code=NO_ROLE)

    def get_invalid_login_error(self):
        if _directory_failed(self.request):
            return ValidationError(
                _(
                    "The directory (LDAP) could not be reached or did not answer in time, so your password "
                    "could not be checked. Try again later; accounts kept in Cronboard can still sign in."
                ),
                code=DIRECTORY_UNAVAILABLE,
            )
        return super().get_invalid_login_error()


class SignInView(LoginView):
    """Django's sign-in, which also keeps the browser's time zone (a hidden
    field console.js fills) for a user who has none yet."""

    form_class = SignInForm

    def form_valid(self, form):
        response = super().form_valid(form)
        zone = browser_zone(self.request.POST.get("time_zone"))
        if zone:
            profile, _created = Profile.objects.get_or_create(user=form.get_user())
            if not profile.time_zone:
                profile.time_zone = zone
                profile.save(update_fields=["time_zone"])
        return response

    def form_invalid(self, form):
        if form.has_error(NON_FIELD_ERRORS, NO_ROLE):
            return no_role_response(self.request, source=form.refused_source)
        return super().form_invalid(form)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        context["directory_unavailable"] = form is not None and form.has_error(
            NON_FIELD_ERRORS, DIRECTORY_UNAVAILABLE
        )
        return context
