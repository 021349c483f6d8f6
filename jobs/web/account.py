"""A user's own pages: the settings page (the config centre), messages,
API tokens on the profile, and the favicon."""

from django.conf import settings
from django.contrib import messages
from django.contrib.staticfiles import finders
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from jobs import access, cron, links, refusals, services, tokens
from jobs.access import login_required
from jobs.checks import stored_refusals
from jobs.handlers.sql import role_warnings
from jobs.web.alerts import channel_rows
from jobs.web.common import done, partial_or_page
from jobs.web.forms import SettingsForm, TokenForm


@login_required
def settings_page(request):
    """The config centre: everyone reads, administrators change."""
    if request.method == "POST":
        if not access.can_administer(request.user):
            raise PermissionDenied(_("Only an administrator may do this."))
        form = SettingsForm(request.POST)
        if form.is_valid():
            try:
                form.save(user=request.user)
            except refusals.DemoModeError as exc:
                form.add_error(None, ValidationError(str(exc), code="demo_mode"))
            else:
                messages.success(request, _("Settings saved."))
                return done(request, reverse("jobs:settings"))
    else:
        form = SettingsForm()
    if not access.can_administer(request.user):
        for field in form.fields.values():
            field.disabled = True
    context = {
        "form": form,
        "sql_role_warnings": role_warnings(),
        "stored_refusals": stored_refusals(),
        "channels": channel_rows(),
        "opened_at": links.base_url_mismatch(request.build_absolute_uri("/")),
        "base_url": settings.CRONBOARD_BASE_URL,
    }
    return partial_or_page(request, "jobs/settings.html", "settings-form", context)


def _message_context(request) -> dict:
    mine = access.visible_messages(request.user).select_related("job")
    page = Paginator(mine, 50).get_page(request.GET.get("page"))
    return {"page": page, "unread": mine.filter(read_at__isnull=True).count()}


@login_required
def message_list(request):
    return partial_or_page(request, "jobs/messages.html", "message-list", _message_context(request))


@login_required
def unread_count(request):
    """The top bar's Messages link with its unread badge; every page polls it."""
    unread = access.visible_messages(request.user).filter(read_at__isnull=True).count()
    return render(request, "jobs/_unread_count.html", {"unread": unread})


@login_required
@require_POST
def message_read(request, message_id=None):
    """Mark one of your own messages read, or all of them."""
    if message_id is not None:
        get_object_or_404(access.visible_messages(request.user), pk=message_id)
    services.mark_messages_read(user=request.user, message_id=message_id)
    if request.htmx:
        return render(
            request, "jobs/messages.html#message-list", {**_message_context(request), "oob_count": True}
        )
    return redirect("jobs:messages")


NEW_TOKEN_SESSION_KEY = "cronboard_new_token"


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    """The user's API tokens: create one or revoke one. Both POSTs redirect
    (a reload never creates a second token); a new token's secret rides in
    the session to the next page load, is shown there once and dropped."""
    if request.method == "POST":
        if "revoke" in request.POST:
            if tokens.revoke_token(user=request.user, token_id=request.POST["revoke"]):
                messages.success(request, _("Token revoked: programs using it are now refused."))
            else:
                messages.error(request, _("No such active token: nothing was revoked."))
            return redirect("jobs:profile")
        form = TokenForm(request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                label = _("Token name: {join}") if field == "name" else "{join}"
                messages.error(request, label.format(join=" ".join(errors)))
            return redirect("jobs:profile")
        token, secret = tokens.create_token(
            user=request.user,
            name=form.cleaned_data["name"],
            namespace=form.cleaned_data["namespace"],
            read_only=form.cleaned_data["read_only"],
        )
        request.session[NEW_TOKEN_SESSION_KEY] = {"id": token.pk, "secret": secret}
        return redirect("jobs:profile")
    new_token = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    return render(
        request,
        "jobs/profile.html",
        {
            "api_tokens": request.user.api_tokens.all(),
            "new_secret": new_token["secret"] if new_token else None,
            "new_token_id": new_token["id"] if new_token else None,
            "time_zones": cron.known_zones(),
        },
    )


def favicon(request):
    """/favicon.ico, which browsers ask for whatever the page links."""
    with open(finders.find("jobs/favicon.ico"), "rb") as icon:
        response = HttpResponse(icon.read(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response
