"""The Alerts area's Channels tab (administrators): the named alert
channels, masked, with a form to create or change one, its delete and its
"Send test" (jobs.web.alerts.send_test_channel)."""

from django import forms
from django.contrib import messages
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from jobs import access, channelbook
from jobs.access import login_required
from jobs.formfields import AlertKindsField, ErrorListMixin
from jobs.refusals import DemoModeError
from jobs.web.common import delete_then_list, done, role_required


class ChannelForm(ErrorListMixin, forms.Form):
    name = forms.CharField(max_length=100, label=gettext_lazy("Name"))
    url = forms.CharField(
        max_length=2000,
        required=False,
        label=gettext_lazy("URL"),
        help_text=gettext_lazy(
            "An Apprise URL (slack://…, json://host/path …). Shown masked once saved; leave it as shown to keep it."
        ),
    )
    kinds = AlertKindsField(
        required=False,
        label=gettext_lazy("Receives"),
        help_text=gettext_lazy("None ticked: every kind of alert the job (or Settings) asks for."),
    )
    description = forms.CharField(max_length=500, required=False, label=gettext_lazy("Description"))


@login_required
@role_required(access.ADMIN)
def channel_list(request):
    """GET: the channels and an empty form (`?name=` fills in one to edit). POST: save."""
    if request.method == "POST":
        form = ChannelForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                channelbook.save_channel(
                    name=data["name"],
                    url=data["url"],
                    kinds=data["kinds"],
                    description=data["description"],
                    user=request.user,
                )
            except channelbook.ChannelRefused as exc:
                form.add_error(exc.field, str(exc))
            except DemoModeError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, _("Channel “{name}” saved.").format(name=data["name"]))
                return done(request, reverse("jobs:channel_list"))
    else:
        rows = {row["name"]: row for row in channelbook.channel_rows()}
        form = ChannelForm(initial=rows.get(request.GET.get("name", "")) or {})
    return render(request, "jobs/channel_list.html", {"form": form, "rows": channelbook.channel_rows()})


@login_required
@require_POST
@role_required(access.ADMIN)
def channel_delete(request, name):
    return delete_then_list(
        request,
        lambda: channelbook.delete_channel(name=name, user=request.user),
        refused=(channelbook.ChannelRefused, DemoModeError),
        missing=_("No such channel."),
        deleted=_("Channel “{name}” deleted.").format(name=name),
        list_url=reverse("jobs:channel_list"),
    )
