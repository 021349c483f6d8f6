"""Signing in and out: the password form (Django's LoginView) while
CRONBOARD_LOCAL_LOGIN is on, telling a directory that could not be asked
from a wrong password and keeping the browser's time zone; single sign-on
through an OpenID Connect provider (jobs.oidc); and the sign-out that also
ends the provider's session when it offers that. A sign-in that leaves its
user with no role (jobs.rolemapping) ends on a page that says so instead of
a session, whichever door it came through."""

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import NON_FIELD_ERRORS, SuspiciousOperation, ValidationError
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext as _
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
    OIDCLogoutView,
)

from jobs import audit, oidc
from jobs.models import AuditEvent, GrantSource, Profile
from jobs.text import storable
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


def password_form_enabled() -> bool:
    """The password form is there for the passwords Cronboard stores
    (CRONBOARD_LOCAL_LOGIN) and for a directory's (LDAP_SERVER_URI)."""
    return settings.CRONBOARD_LOCAL_LOGIN or bool(settings.LDAP_SERVER_URI)


class SignInView(LoginView):
    """The sign-in page: the password form (password_form_enabled), and
    "Sign in with …" when a provider is configured. A password sign-in also
    keeps the browser's time zone (a hidden field console.js fills) for a
    user who has none yet."""

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

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        context["directory_unavailable"] = form is not None and form.has_error(
            NON_FIELD_ERRORS, DIRECTORY_UNAVAILABLE
        )
        context["password_form"] = password_form_enabled()
        context["oidc_enabled"] = oidc.enabled()
        context["oidc_provider_name"] = settings.OIDC_PROVIDER_NAME
        return context

    def post(self, request, *args, **kwargs):
        if not password_form_enabled():
            return render(
                request,
                "registration/sign_in_refused.html",
                {"message": _("Signing in with a password is turned off here; use single sign-on.")},
                status=403,
            )
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        if form.has_error(NON_FIELD_ERRORS, NO_ROLE):
            return no_role_response(self.request, source=form.refused_source)
        return super().form_invalid(form)


def _refused(request, exc: oidc.SignInRefused):
    """The page for a refused single sign-on, and its audit row (for a user
    left with no role, jobs.rolemapping wrote it)."""
    if exc.reason == oidc.NO_ROLE:
        return no_role_response(request, source=oidc.SOURCE)
    audit.record(
        action="sign-in-failed",
        subject=AuditEvent.Subject.SIGN_IN,
        via=AuditEvent.Via.SSO,
        username=storable(exc.username),
        changes={"source": oidc.SOURCE, "reason": exc.reason, "detail": storable(exc.detail)[:500]},
    )
    return render(request, "registration/sign_in_refused.html", {"message": exc.message}, status=exc.status)


class _Start(OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc.setting)


class _Callback(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc.setting)

    def get(self, request):
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            # A state this browser never started, or started long ago.
            raise oidc.SignInRefused("state") from exc

    def login_failure(self):
        error = self.request.GET.get("error")
        if error:
            raise oidc.SignInRefused("cancelled", detail=error)
        if "code" not in self.request.GET or "oidc_states" not in self.request.session:
            raise oidc.SignInRefused("state")
        # No backend let the person in (a throttled address, a disabled account).
        raise oidc.SignInRefused("refused")


def oidc_start(request):
    """Send the browser to the provider, with state, nonce and PKCE's challenge."""
    if not oidc.enabled():
        raise Http404
    try:
        return _Start.as_view()(request)
    except oidc.SignInRefused as exc:
        return _refused(request, exc)


def oidc_callback(request):
    """Where the provider sends the browser back: a session, or a page that says why not."""
    if not oidc.enabled():
        raise Http404
    try:
        return _Callback.as_view()(request)
    except oidc.SignInRefused as exc:
        return _refused(request, exc)


class LogoutView(OIDCLogoutView):
    """Sign-out (POST only): ends the Cronboard session, then sends the
    browser to the provider's end_session_endpoint after a single sign-on
    (oidc.sign_out_url), else to the sign-in page. The provider is reached
    from a page of ours, not by the form's own redirect: browsers hold a
    form's redirects to the CSP's form-action, which is 'self'."""

    get_settings = staticmethod(oidc.setting)

    def post(self, request):
        response = super().post(request)
        target = response.get("Location", "")
        if response.status_code == 302 and not target.startswith("/"):
            return render(request, "registration/signed_out.html", {"provider_url": target})
        return response
