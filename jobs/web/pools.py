"""The Concurrency pools page (administrators) and a job's backfills: the
form that counts a range's fires and, confirmed, creates their runs
(editors), and the cancel of a whole backfill (operators)."""

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from jobs import access, backfills, pools
from jobs.access import login_required
from jobs.formfields import ErrorListMixin
from jobs.models import Backfill
from jobs.web.common import delete_then_list, done, role_required


class PoolForm(ErrorListMixin, forms.Form):
    name = forms.CharField(max_length=100, label=gettext_lazy("Name"))
    size = forms.IntegerField(
        label=gettext_lazy("Size"), help_text=gettext_lazy("Runs at once, cluster-wide.")
    )
    description = forms.CharField(max_length=500, required=False, label=gettext_lazy("Description"))


@login_required
@role_required(access.ADMIN)
def pool_list(request):
    """GET: the pools and an empty form (`?name=` fills in one to resize). POST: save."""
    if request.method == "POST":
        form = PoolForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                pools.save_pool(
                    name=data["name"], size=data["size"], description=data["description"], user=request.user
                )
            except pools.PoolRefused as exc:
                form.add_error(exc.field, str(exc))
            else:
                messages.success(request, _("Pool “{name}” saved.").format(name=data["name"]))
                return done(request, reverse("jobs:pool_list"))
    else:
        rows = {row["name"]: row for row in pools.pool_rows()}
        chosen = rows.get(request.GET.get("name", ""))
        form = PoolForm(initial=chosen or {})
    return render(request, "jobs/pool_list.html", {"form": form, "rows": pools.pool_rows()})


@login_required
@require_POST
@role_required(access.ADMIN)
def pool_delete(request, name):
    return delete_then_list(
        request,
        lambda: pools.delete_pool(name=name, user=request.user),
        refused=(pools.PoolRefused,),
        missing=_("No such pool."),
        deleted=_("Pool “{name}” deleted.").format(name=name),
        list_url=reverse("jobs:pool_list"),
    )


@login_required
@role_required(access.EDIT)
def job_backfill(request, job_id):
    """GET: the range form. POST: count the fires and ask to confirm; POST
    with `confirm`: create the runs."""
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
    form = backfills.BackfillForm(request.POST if request.method == "POST" else None)
    plan = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if request.POST.get("confirm") != "yes":
                plan = backfills.plan_backfill(
                    job=job,
                    start=data["range_start"],
                    end=data["range_end"],
                    include_succeeded=data["include_succeeded"],
                )
            else:
                backfill = backfills.start_backfill(
                    job=job,
                    start=data["range_start"],
                    end=data["range_end"],
                    parallel=data["parallel"],
                    include_succeeded=data["include_succeeded"],
                    user=request.user,
                )
                messages.success(
                    request,
                    _("Backfill of “{name}”: {fires} run(s), {parallel} at a time.").format(
                        name=job.name, fires=backfill.fires, parallel=backfill.parallel
                    ),
                )
                return done(request, reverse("jobs:job_detail", args=[job.pk]))
        except backfills.BackfillRefused as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
    recent = [
        {"backfill": backfill, "runs": backfills.progress(backfill)}
        for backfill in Backfill.objects.filter(job=job)[:10]
    ]
    return render(request, "jobs/backfill.html", {"job": job, "form": form, "plan": plan, "recent": recent})


@login_required
@require_POST
@role_required(access.OPERATE)
def backfill_cancel(request, backfill_id):
    backfill = get_object_or_404(Backfill.objects.select_related("job"), pk=backfill_id)
    job = access.get_job_for_user(request.user, backfill.job_id)
    access.require(request.user, access.OPERATE, job=job)
    reached = backfills.cancel_backfill(backfill=backfill, user=request.user)
    messages.success(request, _("Backfill cancelled: {count} run(s).").format(count=reached))
    return done(request, reverse("jobs:job_backfill", args=[job.pk]))
