"""The job form's fields for split fires: `shards` (each fire as 1 to
Job.MAX_SHARDS runs, shard 0 to N - 1, on any node) and `broadcast` (each
fire as one run on every live node, pinned to it). A mixin of JobForm, so
the console, the API and `jobs import` validate them the same way.

Both want the overlap policy `skip`: the others are about one live run, and
a split fire is several. `queue_one` and `replace` would queue or cancel
pieces of a fire one at a time, with admission letting one run of the job
through at once (jobs.admission), and `allow` would count each piece as a
run against max_parallel. With `skip`, a fire comes only when every piece
of the previous one has ended, on every node. A pool is refused for the
same reason: its runs wait for admission one place at a time, so a split
fire would never run side by side, and a broadcast run could wait for a
place while its node died."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.models import Job

# The codes of the refusals (docs/api.md).
CODE_SHARDS_RANGE = "47036"
CODE_SHARDS_WITH_BROADCAST = "47037"
CODE_SPLIT_OVERLAP = "47038"
CODE_SPLIT_POOL = "47039"


class ShardFieldsMixin:
    def __init_subclass__(cls, **kwargs):
        # The console's page places these fields in the schedule's section
        # (templates/jobs/job_form.html), beside the overlap fields.
        super().__init_subclass__(**kwargs)
        cls.PLACED_FIELDS = frozenset(getattr(cls, "PLACED_FIELDS", ())) | {"shards", "broadcast"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Any whole number: the range is clean_shards' to refuse, with its code.
        self.fields["shards"] = forms.IntegerField(
            required=False,
            label=gettext_lazy("Shards"),
            help_text=_(
                "Split each fire into this many runs (1 to {max_shards:,}), which run side by side "
                "on any node; each is told its shard."
            ).format(max_shards=Job.MAX_SHARDS),
            initial=self.instance.shards,
        )
        self.fields["broadcast"].label = gettext_lazy("Broadcast: one run on every live node")
        self.fields["broadcast"].help_text = gettext_lazy(
            "Each fire runs once on every scheduler node that is up, pinned to it."
        )

    def clean_shards(self):
        value = self.cleaned_data.get("shards")
        if value is None:
            return 1
        if not 1 <= value <= Job.MAX_SHARDS:
            raise ValidationError(
                _("Shards: a whole number from 1 to {max_shards:,}.").format(max_shards=Job.MAX_SHARDS),
                code=CODE_SHARDS_RANGE,
            )
        return value

    def clean(self):
        data = super().clean()
        shards, broadcast = data.get("shards") or 1, bool(data.get("broadcast"))
        if shards > 1 and broadcast:
            self.add_error(
                "broadcast",
                ValidationError(
                    _("A job is either sharded or broadcast: set shards to 1 for a broadcast job."),
                    code=CODE_SHARDS_WITH_BROADCAST,
                ),
            )
        if shards == 1 and not broadcast:
            return data
        split = _("A broadcast job") if broadcast else _("A sharded job")
        policy = data.get("overlap_policy")
        if policy and policy != Job.OverlapPolicy.SKIP and "overlap_policy" not in self.errors:
            self.add_error(
                "overlap_policy",
                ValidationError(
                    _(
                        "{split} skips a fire while its previous fire still runs: "
                        "the overlap policy must be “skip”."
                    ).format(split=split),
                    code=CODE_SPLIT_OVERLAP,
                ),
            )
        if data.get("pool") and "pool" not in self.errors:
            self.add_error(
                "pool",
                ValidationError(
                    _(
                        "{split} cannot be in a concurrency pool: its runs are meant to run side by side."
                    ).format(split=split),
                    code=CODE_SPLIT_POOL,
                ),
            )
        return data
