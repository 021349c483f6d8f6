"""The Secrets page: staff list, create, replace and delete secrets. A value
is written once and never shown back: the list shows “set on … by …”, the
form's value field is a password input that is never pre-filled."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, jsontext, kinds, refusals, secrets, services
from jobs.access import login_required
from jobs.core import demo
from jobs.formfields import SecretForm
from jobs.models import AuditEvent, Secret
from jobs.web.common import delete_then_list, done, role_required


def _rows() -> list[dict]:
    return [
        {"name": s.name, "description": s.description, "set": secrets.describe(s), "namespaces": s.namespaces}
        for s in Secret.objects.only("name", "description", "set_at", "set_by", "namespaces")
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
                    namespaces=data["namespaces"],
                    user=request.user,
                    via=AuditEvent.Via.CONSOLE,
                )
            except refusals.ServiceError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, _("Secret “{name}” saved.").format(name=data["name"]))
            return done(request, reverse("jobs:secret_list"))
    else:
        name = request.GET.get("name", "")
        existing = Secret.objects.filter(name=name).first()
        if existing:
            initial = {
                "name": existing.name,
                "description": existing.description,
                "namespaces": ", ".join(existing.namespaces or []),
            }
        else:
            # A new name, as the job form's "Move to a secret" suggests it.
            initial = {"name": name} if secrets.NAME_RE.match(name) else {}
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
    return delete_then_list(
        request,
        lambda: services.delete_secret(name=name, user=request.user, via=AuditEvent.Via.CONSOLE),
        refused=(refusals.ServiceError,),
        missing=_("No such secret."),
        deleted=_("Secret “{name}” deleted.").format(name=name),
        list_url=reverse("jobs:secret_list"),
    )


# -- "Move to a secret" on the job form -----------------------------------------------


def _typed_properties(data) -> dict:
    """The properties as the job form's fields hold them while they are typed:
    the property bag (a JSON object) and the chosen kind's own fields."""
    try:
        properties = jsontext.loads(data.get("properties") or "{}")
    except ValueError:  # JsonTextError too: the form says what is wrong with it
        properties = {}
    if not isinstance(properties, dict):
        properties = {}
    kind = kinds.KINDS.get(data.get("kind"))
    for name in kind.fields if kind is not None else ():
        if data.get(name):
            properties[name] = data[name]
    return properties


def credential_moves(properties: dict, job_name: str) -> list[dict]:
    """The job form's "Move to a secret" rows: one per credential typed in
    clear, by name only (the value stays in the browser)."""
    return [
        {
            "property": key,
            "entry": name if name != key else "",
            "label": name if name == key else f"{key}: {name}",
            "suggested": secrets.suggested_name(job_name, name),
        }
        for key, name, _value in secrets.clear_credentials(properties)
    ]


def form_credential_moves(data, job_name: str) -> list[dict]:
    return credential_moves(_typed_properties(data), job_name)


@login_required
@require_POST
@role_required(access.EDIT)
def secret_candidates(request):
    """The job form's list of credentials typed in clear, redrawn as it is
    typed; empty for a user who may not store secrets (an admin's right)."""
    rows = []
    if access.can_administer(request.user):
        rows = form_credential_moves(request.POST, request.POST.get("name", "").strip())
    return render(request, "jobs/_credential_moves.html#credential-move-list", {"credential_moves": rows})


@login_required
@require_POST
@role_required(access.ADMIN)
def secret_move(request):
    """Store a credential typed in the job form as the secret `name` and answer
    the reference that replaces it there: {"reference": …}. A name in use is
    replaced only with `replace` set (409 until then); the value is never
    sent back."""
    name = request.POST.get("name", "").strip()
    value = request.POST.get("value", "")
    try:
        refusals.check_demo_mode("change secrets")
        name = secrets.check_name(name)
        if not request.POST.get("replace") and Secret.objects.filter(name=name).exists():
            message = _("A secret named “{name}” exists already. Replace its value?").format(name=name)
            return JsonResponse({"code": "secret_exists", "message": message}, status=409)
        services.set_secret(name=name, value=value, user=request.user, via=AuditEvent.Via.CONSOLE)
    except ValidationError as exc:
        return JsonResponse({"code": exc.code or "invalid", "message": exc.messages[0]}, status=400)
    except refusals.DemoModeError as exc:
        return JsonResponse({"code": "demo_mode", "message": str(exc)}, status=403)
    except refusals.ServiceError as exc:
        return JsonResponse({"code": "refused", "message": str(exc)}, status=400)
    return JsonResponse({"name": name, "reference": f"{{{{ secret.{name} }}}}"})
