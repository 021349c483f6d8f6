"""The console's alert pages: recent alerts with their delivery state, a
job's alerts (a fragment the job page loads), and the settings page's
"send test email" action. Self-contained so the console can slot them in."""

from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from jobs import alerts
from jobs.access import can_edit, can_view, get_job_for_user
from jobs.config import get_setting, parse_email_list
from jobs.models import Alert
from jobs.outbox import describe_failure
from jobs.views import login_required

RECENT_ALERTS = 100
JOB_ALERTS = 20


@login_required
@require_GET
def alert_list(request):
    if not can_view(request.user):
        raise PermissionDenied
    status = request.GET.get("status", "")
    shown = Alert.objects.select_related("job").order_by("-created_at", "-id")
    if status in Alert.Status.values:
        shown = shown.filter(status=status)
    return render(
        request,
        "jobs/alert_list.html",
        {"alerts": shown[:RECENT_ALERTS], "status": status, "statuses": Alert.Status.choices},
    )


@login_required
@require_GET
def job_alerts(request, job_id):
    job = get_job_for_user(request.user, job_id)
    return render(
        request,
        "jobs/_job_alerts.html",
        {"job": job, "alerts": job.alerts.order_by("-created_at", "-id")[:JOB_ALERTS]},
    )


@login_required
@require_POST
def send_test_email(request):
    """Staff only. To the address typed, else the alert emails setting, else
    the signed-in user's own address. The answer says what the server said."""
    if not can_edit(request.user):
        raise PermissionDenied
    typed = request.POST.get("to", "")
    result = {"to_value": typed}
    try:
        to = (
            parse_email_list(typed)
            or get_setting("sys.job.alertEmails")
            or parse_email_list(request.user.email)
        )
        if not to:
            raise ValidationError("Enter an address to send the test email to.")
        alerts.send_test_email(to=to, user=request.user)
        result.update(ok=True, to=to)
    except ValidationError as exc:
        result.update(ok=False, error=" ".join(exc.messages))
    except Exception as exc:
        _permanent, reply = describe_failure(exc)
        result.update(ok=False, error=f"The mail server did not take it: {reply}")
    template = "jobs/_test_email.html" if request.htmx else "jobs/test_email.html"
    return render(request, template, {"test_email": result})
