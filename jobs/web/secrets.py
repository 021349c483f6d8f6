"""The Secrets page: staff list, create, replace and delete secrets. A value
is written once and never shown back: the list shows “set on … by …”, the
form's value field is a password input that is never pre-filled."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, refusals, secrets, services
from jobs.access import login_required
from jobs.core import demo
from jobs.forms import SecretForm
from jobs.models import AuditEvent, Secret
from jobs.web.common import done, role_required


def _rows() -> list[dict]:
    return [
        {"name": s.name, "description": s.description, "set": secrets.describe(s)}
        for s in Secret.objects.only("name", "description", "set_at", "set_by")
    ]


@login_required
@role_required(access.ADMIN)
def secret_list(request):
    """GET: the list and an empty form (`?name=` fills in the name and the
    description of the secret whose value is to be replaced). POST: save."""
    if request.method == "POST":
        form = SecretForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                services.set_secret(
                    name=data["name"],
                    value=data["value"],
                    description=data["description"],
                    user=request.user,
                    via=AuditEvent.Via.CONSOLE,
                )
            except refusals.ServiceError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, _("Secret “{name}” saved.").format(name=data["name"]))
            return done(request, reverse("jobs:secret_list"))
    else:
        existing = Secret.objects.filter(name=request.GET.get("name", "")).first()
        initial = {"name": existing.name, "description": existing.description} if existing else {}
        form = SecretForm(initial=initial)
    context = {
        "form": form,
        "rows": _rows(),
        "demo_refusal": demo.refusal("change secrets"),
        "reference": "{{ secret.NAME }}",
    }
    return render(request, "jobs/secret_list.html", context)


@login_required
@require_POST
@role_required(access.ADMIN)
def secret_delete(request, name):
    try:
        deleted = services.delete_secret(name=name, user=request.user, via=AuditEvent.Via.CONSOLE)
    except refusals.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        if not deleted:
            raise Http404(_("No such secret."))
        messages.success(request, _("Secret “{name}” deleted.").format(name=name))
    return done(request, reverse("jobs:secret_list"))
