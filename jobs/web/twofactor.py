"""Two-factor sign-in pages (jobs.twofactor): the second step of a
password sign-in, and the profile's page that sets up an authenticator app,
shows recovery codes once and turns it off."""

import base64

import segno
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from jobs import twofactor
from jobs.web.forms import TwoFactorCodeForm

NEW_CODES_SESSION_KEY = "cronboard_recovery_codes"


def _next_url(request) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return resolve_url(settings.LOGIN_REDIRECT_URL)


def _signed_in(view):
    """Signed in with a password, whatever the second step's state (so not
    access.login_required, which the pending step would bounce)."""

    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return wrapper


@_signed_in
@require_http_methods(["GET", "POST"])
def verify(request):
    """The second step: a code from the app, or a recovery code."""
    if request.user.is_verified() or not twofactor.is_enrolled(request.user):
        return redirect(_next_url(request))
    form = TwoFactorCodeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid() and twofactor.verify(request, form.cleaned_data["code"]):
            return redirect(_next_url(request))
        status = 400
        if twofactor.throttled(request.user):
            message = _("Too many wrong codes: wait a minute, then try again.")
        else:
            message = _(
                "That code is not right. Use the code your app shows now, or one of your recovery codes."
            )
        form.errors.clear()
        form.add_error("code", message)
    context = {"form": form, "next": request.POST.get("next") or request.GET.get("next", "")}
    return render(request, "registration/two_factor_verify.html", context, status=status)


def _qr_code(uri: str) -> str:
    return segno.make(uri, error="m").svg_data_uri(scale=5, border=2)


def _page(request, *, form=None, status=200):
    user = request.user
    pending = twofactor.app_device(user, confirmed=False)
    enrolled = twofactor.app_device(user)
    context = {
        "enrolled": enrolled,
        "pending": pending,
        "required": twofactor.required_for(user),
        "recovery_left": twofactor.recovery_codes_left(user),
        "new_codes": request.session.pop(NEW_CODES_SESSION_KEY, None),
        "form": form or TwoFactorCodeForm(),
        "sso": not twofactor.signed_in_locally(request),
    }
    if pending is not None:
        uri = twofactor.provisioning_uri(pending)
        context["qr_code"] = _qr_code(uri)
        # The key typed by hand, in groups of four as apps show it.
        key = base64.b32encode(pending.bin_key).decode().rstrip("=")
        context["manual_key"] = " ".join(key[i : i + 4] for i in range(0, len(key), 4))
    return render(request, "jobs/two_factor.html", context, status=status)


@_signed_in
@require_http_methods(["GET", "POST"])
def manage(request):
    """The profile's two-factor page: set up (again), new recovery codes,
    turn off (with a current code; not where the policy requires it)."""
    if request.method == "GET":
        return _page(request)
    action = request.POST.get("action")
    user = request.user
    # Every change but the first set-up needs a session that gave a code.
    if twofactor.is_enrolled(user) and not user.is_verified():
        return redirect("jobs:two_factor_verify")
    if action == "start":
        twofactor.start_enrollment(user)
        return redirect("jobs:two_factor")
    if action == "recovery" and twofactor.is_enrolled(user):
        request.session[NEW_CODES_SESSION_KEY] = twofactor.new_recovery_codes(user)
        return redirect("jobs:two_factor")
    if action == "off" and twofactor.is_enrolled(user):
        if twofactor.required_for(user):
            messages.error(
                request, _("Two-factor sign-in is required for your account: it cannot be turned off.")
            )
            return redirect("jobs:two_factor")
        form = TwoFactorCodeForm(request.POST)
        if form.is_valid() and twofactor.check_code(user, form.cleaned_data["code"]) is not None:
            twofactor.turn_off(user)
            messages.success(request, _("Two-factor sign-in is off."))
            return redirect("jobs:two_factor")
        form.errors.clear()
        form.add_error("code", _("That code is not right: two-factor sign-in stays on."))
        return _page(request, form=form, status=400)
    messages.error(request, _("Nothing was changed: that action is not available now."))
    return redirect("jobs:two_factor")


@_signed_in
@require_POST
def confirm(request):
    """Confirm a new authenticator app with the code it shows."""
    if twofactor.is_enrolled(request.user) and not request.user.is_verified():
        return redirect("jobs:two_factor_verify")
    form = TwoFactorCodeForm(request.POST)
    codes = twofactor.confirm_enrollment(request, form.cleaned_data["code"]) if form.is_valid() else None
    if codes is None:
        form.errors.clear()
        form.add_error(
            "code", _("That code is not right. Check the app's clock and enter the code it shows now.")
        )
        return _page(request, form=form, status=400)
    request.session[NEW_CODES_SESSION_KEY] = codes
    messages.success(request, _("Two-factor sign-in is on."))
    return redirect("jobs:two_factor")
