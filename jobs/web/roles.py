"""The roles page: administrators grant a user or a group a role, everywhere
or in one namespace, and revoke it. Grants are written by jobs.roles, as the
roles command and the Django admin write them, and audited there."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, roles
from jobs.access import login_required
from jobs.models import AuditEvent, RoleGrant
from jobs.web.common import done, role_required
from jobs.web.forms import RoleGrantForm


def _holder(grant: RoleGrant) -> str:
    return grant.user.get_username() if grant.user_id else _("group {name}").format(name=grant.group.name)


@login_required
@role_required(access.ADMIN)
def role_list(request):
    """GET: every grant and the form; POST: grant (replacing the role the
    holder has there)."""
    if request.method == "POST":
        form = RoleGrantForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            holder = {data["holder_type"]: data["holder"]}
            roles.grant_role(
                role=data["role"],
                namespace=data["namespace"],
                by=request.user,
                via=AuditEvent.Via.CONSOLE,
                **holder,
            )
            messages.success(
                request,
                _("{holder}: {role} {where}.").format(
                    holder=str(data["holder"]), role=data["role"], where=roles.where(data["namespace"])
                ),
            )
            return done(request, reverse("jobs:role_list"))
    else:
        form = RoleGrantForm()
    grants = RoleGrant.objects.select_related("user", "group").order_by(
        "user__username", "group__name", "namespace"
    )
    rows = [
        {"pk": g.pk, "holder": _holder(g), "role": g.get_role_display(), "where": roles.where(g.namespace)}
        for g in grants
    ]
    return render(request, "jobs/roles.html", {"form": form, "rows": rows})


@login_required
@require_POST
@role_required(access.ADMIN)
def role_revoke(request, grant_id):
    grant = RoleGrant.objects.select_related("user", "group").filter(pk=grant_id).first()
    if grant is None:
        raise Http404(_("No such grant (it was revoked already?)."))
    holder = {"user": grant.user} if grant.user_id else {"group": grant.group}
    roles.revoke_role(namespace=grant.namespace, by=request.user, via=AuditEvent.Via.CONSOLE, **holder)
    messages.success(
        request,
        _("{holder}: no role {where}.").format(holder=_holder(grant), where=roles.where(grant.namespace)),
    )
    return done(request, reverse("jobs:role_list"))
