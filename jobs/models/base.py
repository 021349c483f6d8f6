"""What every model module shares: the defaults a job or task gets, the
limits on them, how a choice field reads its label, and keyset pages."""

from datetime import datetime

from django.db.models import Q
from django.utils.encoding import force_str

from jobs import cron

# What a job or a one-off task gets when it does not say (the model, the job
# form, the API, `jobs import`, tasks.enqueue).
DEFAULT_MAX_RETRIES = 0
DEFAULT_RETRY_INTERVAL_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_ALERT_THRESHOLD = 3
# The limits on them: the interval floor is the cron module's (error 47004);
# a run's timeout (and an HTTP job's own request timeout) is at most a day.
MIN_INTERVAL_SECONDS = cron.MIN_INTERVAL_SECONDS
MAX_TIMEOUT_SECONDS = 86_400
# overlap_policy=allow: at most this many runs of one job live at once.
MAX_PARALLEL = 100
# A sharded job's fire is split into at most this many runs (Job.shards).
MAX_SHARDS = 1_000
# The longest stable delay a cron job's fires may get (Job.jitter_seconds).
MAX_JITTER_SECONDS = 3_600


class ChoiceLabels:
    """`get_FOO_display()` without translating every label of the field.
    Django's looks the value up in `dict(make_hashable(field.flatchoices))`,
    and hashing a lazy label translates it: every label of the field, for
    every cell of a runs table. This one translates only the label it
    returns."""

    def _get_FIELD_display(self, field):
        value = getattr(self, field.attname)
        for choice, label in field.flatchoices:
            if choice == value:
                return force_str(label, strings_only=True)
        return force_str(value, strings_only=True)


def keyset_before(field: str, at: datetime, pk: int) -> Q:
    """The rows after (at, pk) in newest-first (field, id) order: one keyset
    page further back. The plain bound on `field` lets its index seek; the
    OR only sorts out rows at the same instant."""
    return Q(**{f"{field}__lte": at}) & (Q(**{f"{field}__lt": at}) | Q(id__lt=pk))


def keyset_after(field: str, at: datetime, pk: int) -> Q:
    """The rows before (at, pk) in newest-first (field, id) order: one keyset
    page nearer the present (see keyset_before)."""
    return Q(**{f"{field}__gte": at}) & (Q(**{f"{field}__gt": at}) | Q(id__gt=pk))
