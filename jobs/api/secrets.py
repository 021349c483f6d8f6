"""The API's secrets (editors list them, admins change them): the list, without values; setting one by
name (created or replaced, its value never answered back); deleting one.
Setting and deleting are refused in demo mode."""

from django.core.exceptions import ValidationError
from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext_noop
from ninja import Path, Router

from jobs import access, secrets, services
from jobs.api.framework import VIA, ApiError
from jobs.api.schemas.base import CHANGE_ERRORS, EDIT_ERRORS, Error
from jobs.api.schemas.secrets import Secret, SecretInput, SecretList
from jobs.formfields import SecretForm
from jobs.models import Secret as SecretRow
from jobs.models.secrets import NAME_PATTERN
from jobs.refusals import require_admin

router = Router()
# The name's rule, checked (code invalid, field "name") and stated in the
# document from the model's pattern.
NAME = Path(..., description="The secret's name: 1 to 100 of A-Z a-z 0-9 _ . -", pattern=f"^{NAME_PATTERN}$")


def _secret_to_dict(secret: SecretRow) -> dict:
    return {
        "name": secret.name,
        "description": secret.description,
        "set_at": secret.set_at.isoformat().replace("+00:00", "Z"),
        "set_by": secret.set_by,
        "namespaces": secret.namespaces or [],
    }


def _require_user(request) -> None:
    # Reading the list too: which secrets exist is for those who may use
    # them in a job (editors).
    if not access.can_edit(request.user):
        raise ApiError(403, "forbidden", "Only editors and administrators may see secrets.")


@router.get(
    "/secrets",
    operation_id="listSecrets",
    url_name="secrets",
    summary="Secrets, by name (editor): never their values.",
    response={200: SecretList, 401: Error, 403: Error},
)
def list_secrets(request):
    _require_user(request)
    return JsonResponse({"results": [_secret_to_dict(s) for s in SecretRow.objects.all()]})


@router.put(
    "/secrets/{name}",
    operation_id="setSecret",
    url_name="secret",
    summary="Create or replace a secret (admin; refused in demo mode).",
    description="The value is never answered back. 201 when created, 200 when replaced.",
    response={200: Secret, 201: Secret, **EDIT_ERRORS},
)
def set_secret(request, payload: SecretInput, name: str = NAME):
    require_admin(request.user, gettext_noop("change secrets"))
    # The console's form checks the body, each problem under its own field.
    form = SecretForm({"name": name, "value": payload.value, "description": payload.description or ""})
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    namespaces = None
    if payload.namespaces is not None:
        try:
            namespaces = secrets.check_namespaces(payload.namespaces)
        except ValidationError as exc:
            raise ApiError(400, exc.code or "invalid", exc.messages[0], "namespaces") from None
    created = not SecretRow.objects.filter(name=name).exists()
    secret = services.set_secret(
        name=name,
        value=form.cleaned_data["value"],
        description=None if payload.description is None else form.cleaned_data["description"],
        namespaces=namespaces,
        user=request.user,
        via=VIA,
    )
    return JsonResponse(_secret_to_dict(secret), status=201 if created else 200)


@router.delete(
    "/secrets/{name}",
    operation_id="deleteSecret",
    url_name="secret",
    summary="Delete a secret (admin; refused in demo mode). Jobs that name it fail until it exists again.",
    response={204: None, **CHANGE_ERRORS},
)
def delete_secret(request, name: str = NAME):
    require_admin(request.user, gettext_noop("change secrets"))
    if not services.delete_secret(name=name, user=request.user, via=VIA):
        raise ApiError(404, "not_found", "No such secret.")
    return HttpResponse(status=204)
