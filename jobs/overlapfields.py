"""The job form's overlap and concurrency fields: `overlap_policy`,
`max_parallel` (for `allow`: 1 to Job.MAX_PARALLEL) and `pool` (an existing
pool's name, or blank). A mixin of JobForm, so the console, the API and
`jobs import` validate them the same way."""

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.models import Job, Pool

# A job names a pool that does not exist (docs/api.md).
CODE_UNKNOWN_POOL = "47023"


class OverlapFieldsMixin:
    OVERLAP_LABELS = {
        "overlap_policy": gettext_lazy("When a fire comes while a run is live"),
        "max_parallel": gettext_lazy("Runs side by side at most"),
        "pool": gettext_lazy("Concurrency pool"),
    }

    def __init_subclass__(cls, **kwargs):
        # The console's page places these fields in the schedule's section
        # (templates/jobs/job_form.html), beside the form's own.
        super().__init_subclass__(**kwargs)
        cls.PLACED_FIELDS = frozenset(getattr(cls, "PLACED_FIELDS", ())) | frozenset(cls.OVERLAP_LABELS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, label in self.OVERLAP_LABELS.items():
            self.fields[name].required = False  # left out: the model's default
            self.fields[name].label = label
        self.fields["max_parallel"].help_text = gettext_lazy(
            "With “run side by side”: how many runs at once."
        )
        self.fields["pool"].help_text = gettext_lazy(
            "A pool's runs start only while fewer than its size are live across the cluster; blank for none."
        )

    def clean_overlap_policy(self):
        return self.cleaned_data.get("overlap_policy") or Job.OverlapPolicy.SKIP

    def clean_max_parallel(self):
        value = self.cleaned_data.get("max_parallel")
        if value is None:
            return 1
        if not 1 <= value <= Job.MAX_PARALLEL:
            raise ValidationError(
                _("Runs side by side at most: a whole number from 1 to {max_parallel}.").format(
                    max_parallel=Job.MAX_PARALLEL
                ),
                code="out_of_range",
            )
        return value

    def clean_pool(self):
        name = (self.cleaned_data.get("pool") or "").strip()
        if name and not Pool.objects.filter(name=name).exists():
            raise ValidationError(
                _("There is no concurrency pool named “{name}”.").format(name=name), code=CODE_UNKNOWN_POOL
            )
        return name
