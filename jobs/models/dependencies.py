"""The workflow graph's edges between jobs (jobs.workflows reads and
writes them)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models.base import ChoiceLabels
from jobs.models.jobs import Job
from jobs.models.runs import Run


class JobDependency(ChoiceLabels, models.Model):
    """An edge of the workflow graph: `downstream` runs after each final
    outcome of `upstream` that matches `on`. Written from Job.after by
    services.save_job; read by the scheduler when a run finishes."""

    class On(models.TextChoices):
        SUCCESS = "success", _("On success")
        FAILURE = "failure", _("On failure")
        FINISH = "finish", _("On any finish")

    downstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="upstream_links")
    upstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="downstream_links")
    on = models.CharField(max_length=10, choices=On.choices, default=On.SUCCESS)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint("downstream", "upstream", name="job_dependency_unique_edge"),
        ]
        indexes = [models.Index(fields=["upstream"], name="job_dependency_upstream_idx")]

    def __str__(self):
        return f"{self.upstream_id} → {self.downstream_id} ({self.on})"

    # Which final run statuses each `on` follows. A cancelled run counts
    # only for `finish`; a skipped fire never ran and starts nothing.
    MATCHES = {
        On.SUCCESS: {Run.Status.SUCCEEDED},
        On.FAILURE: set(Run.FAILED_OUTCOMES),
        On.FINISH: {Run.Status.SUCCEEDED, *Run.FAILED_OUTCOMES, Run.Status.CANCELLED},
    }
