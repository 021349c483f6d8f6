from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from jobs import tokens
from jobs.leases import cluster_status


@login_required
def job_list(request):
    return HttpResponse("Cronboard")


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    """The user's API tokens: create one (its secret is shown on this answer
    only, never again) or revoke one."""
    new_secret = None
    if request.method == "POST":
        if "revoke" in request.POST:
            if tokens.revoke_token(user=request.user, token_id=request.POST["revoke"]):
                messages.success(request, "Token revoked: programs using it are now refused.")
            return redirect("jobs:profile")
        _token, new_secret = tokens.create_token(user=request.user, name=request.POST.get("name", ""))
    return render(
        request,
        "jobs/profile.html",
        {"api_tokens": request.user.api_tokens.all(), "new_secret": new_secret},
    )


@login_required
def cluster(request):
    """Scheduler nodes, the leader lease, recent leadership changes. Any
    signed-in user may look; the status section refreshes itself."""
    context = {"status": cluster_status(now=timezone.now())}
    template = "jobs/cluster.html#cluster-status" if request.htmx else "jobs/cluster.html"
    return render(request, template, context)
