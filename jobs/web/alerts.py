"""The console's alert pages: recent alerts with their delivery state, a
job's alerts (a fragment the job page loads), and the settings page's
"send test email" action. Self-contained so the console can slot them in."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from jobs import acknowledge, alerts, channelnames, channels, links, refusals
from jobs.access import (
    can_administer,
    can_edit,
    can_view,
    get_alert_for_user,
    get_job_for_user,
    login_required,
    visible_alerts,
)
from jobs.config import get_setting, get_stored, parse_email_list
from jobs.core.mailfailures import describe_failure
from jobs.i18n import alert_translation
from jobs.models import Alert, AlertDelivery
from jobs.web.common import done

RECENT_ALERTS = 100
JOB_ALERTS = 20


@login_required
@require_GET
def alert_list(request):
    if not can_view(request.user):
        raise PermissionDenied
    status = request.GET.get("status", "")
    shown = (
        visible_alerts(request.user)
        .select_related("job")
        .prefetch_related("deliveries")
        .order_by("-created_at", "-id")
    )
    if status in Alert.Status.values:
        # The email's state or any channel's: "Refused" finds a refused webhook too.
        matching = AlertDelivery.objects.filter(status=status).values("alert_id")
        shown = shown.filter(Q(status=status) | Q(pk__in=matching))
    return render(
        request,
        "jobs/alert_list.html",
        {"alerts": shown[:RECENT_ALERTS], "status": status, "statuses": Alert.Status.choices},
    )


@login_required
@require_POST
def alert_acknowledge(request, alert_id):
    """An operator of the alert's job says someone is on it; back to the
    page the button was on (POST `back`: "job" for the job's page)."""
    alert = get_alert_for_user(request.user, alert_id)
    try:
        taken = acknowledge.acknowledge_alert(alert=alert, user=request.user)
    except refusals.ForbiddenError as exc:
        raise PermissionDenied(str(exc)) from None
    if taken:
        messages.success(request, _("Alert acknowledged."))
    else:
        messages.info(
            request, _("{user} acknowledged this alert already.").format(user=alert.acknowledged_by or "—")
        )
    if request.POST.get("back") == "job":
        return done(request, reverse("jobs:job_detail", args=[alert.job_id]))
    return done(request, reverse("jobs:alert_list"))


@login_required
@require_GET
def job_alerts(request, job_id):
    job = get_job_for_user(request.user, job_id)
    return render(
        request,
        "jobs/_job_alerts.html",
        {
            "job": job,
            "alerts": job.alerts.prefetch_related("deliveries").order_by("-created_at", "-id")[:JOB_ALERTS],
            "channels": channel_rows(job),
            "own_channels": bool(job.alert_channels),
        },
    )


def channel_rows(job=None) -> list[dict]:
    """The named channels an alert of `job` (None: the global setting) goes
    to, masked, each with its name for "Send test"."""
    names = (
        job.alert_channels if job is not None and job.alert_channels else get_stored("sys.job.alertChannels")
    )
    return [{"name": name, "masked": channels.mask(url)} for name, url in channelnames.urls_for(names)]


@login_required
@require_POST
def send_test_channel(request):
    """Staff only. Send a test message now to one named channel (POST
    `channel`): of a job (POST `job`; its editors), or any (administrators).
    The URL never travels through the browser. Bounded by
    ALERT_CHANNEL_TIMEOUT; the fence is checked first."""
    if not (can_edit(request.user) or can_administer(request.user)):
        raise PermissionDenied
    job = None
    name = request.POST.get("channel", "")[:100]
    try:
        refusals.check_demo_mode("sending a test message")
    except refusals.DemoModeError as exc:
        refused = {"ok": False, "error": str(exc), "index": name}
        return render(request, "jobs/_test_channel.html", {"test_channel": refused, "job": None})
    if request.POST.get("job"):
        try:
            job = get_job_for_user(request.user, int(request.POST["job"]))
        except ValueError:
            raise PermissionDenied from None
    # A job's channels are its editors' to test; any channel, the administrators'.
    if not (can_edit(request.user, job) if job is not None else can_administer(request.user)):
        raise PermissionDenied
    names = [name]
    if job is not None:
        names = [name] if name in (job.alert_channels or get_stored("sys.job.alertChannels") or []) else []
    found = channelnames.urls_for(names)
    if not found:
        result = {"ok": False, "error": _("No such channel (the channels changed since the page was shown).")}
    else:
        url = found[0][1]
        # In the alerts' language: the test shows what the alerts' readers will get.
        with alert_translation():
            if job is not None:
                body = _(
                    "A test message from Cronboard ({base_url}), sent by {user} for the job “{job}”: {url}"
                )
            else:
                body = _("A test message from Cronboard ({base_url}), sent by {user}.")
            body = body.format(
                base_url=settings.CRONBOARD_BASE_URL,
                user=request.user.get_username(),
                job=job.name if job is not None else "",
                url=links.job_url(job.pk) if job is not None else "",
            )
            title = "[Cronboard] " + _("Test message")
        sent = channels.send(url, title=title, body=body)
        result = {"ok": sent.ok, "error": sent.reply, "masked": channels.mask(url), "index": name}
    return render(request, "jobs/_test_channel.html", {"test_channel": result, "job": job})


@login_required
@require_POST
def send_test_email(request):
    """Staff only. To the address typed, else the alert emails setting, else
    the signed-in user's own address. The answer says what the server said."""
    if not can_administer(request.user):
        raise PermissionDenied
    typed = request.POST.get("to", "")
    result = {"to_value": typed}
    try:
        refusals.check_demo_mode("sending a test email")
        to = (
            parse_email_list(typed)
            or get_setting("sys.job.alertEmails")
            or parse_email_list(request.user.email)
        )
        if not to:
            raise ValidationError(_("Enter an address to send the test email to."))
        alerts.send_test_email(to=to, user=request.user)
        result.update(ok=True, to=to)
    except ValidationError as exc:
        result.update(ok=False, error=" ".join(exc.messages))
    except refusals.DemoModeError as exc:
        result.update(ok=False, error=str(exc))
    except Exception as exc:
        _permanent, reply = describe_failure(exc)
        result.update(ok=False, error=_("The mail server did not take it: {reply}").format(reply=reply))
    template = "jobs/_test_email.html" if request.htmx else "jobs/test_email.html"
    return render(request, template, {"test_email": result})
