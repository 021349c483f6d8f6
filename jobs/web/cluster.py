"""The cluster page: scheduler nodes, the leader lease and recent
leadership changes."""

from django.shortcuts import render
from django.utils import timezone

from jobs.access import login_required
from jobs.cluster import cluster_status


@login_required
def cluster(request):
    """Scheduler nodes, the leader lease, recent leadership changes. Any
    signed-in user may look; the status section refreshes itself."""
    context = {"status": cluster_status(now=timezone.now())}
    template = "jobs/cluster.html#cluster-status" if request.htmx else "jobs/cluster.html"
    return render(request, template, context)
