"""The audit page: every audit row (jobs, settings, alert channels,
sign-ins), newest first, filtered by who, job, subject, action, door and
time, in keyset pages on (created_at, id) with the run history's cursor, so
a deep page costs what the first does."""

from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from jobs import access
from jobs.access import login_required
from jobs.forms import NAMESPACE_RE
from jobs.models import AuditEvent, job_name, parse_run_cursor, run_cursor
from jobs.models.base import keyset_before
from jobs.web.common import partial_or_page

EVENTS_PER_PAGE = 50


def _instant(text: str, *, end: bool) -> datetime | None:
    """A filter's time, in UTC: a date (its first moment, or for `end` the
    first moment of the next day) or a date and time; None if unreadable."""
    try:
        day = parse_date(text)
        moment = None if day else parse_datetime(text)
    except ValueError:
        return None
    if moment is None and day is None:
        return None
    if moment is None:
        try:
            moment = datetime.combine(day + timedelta(days=1) if end else day, time.min)
        except OverflowError:  # the day after 9999-12-31
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not date(1, 1, 2) <= moment.date() <= date(9999, 12, 30):
        return None
    return moment


def _filters(params) -> tuple[Q, dict, list[str]]:
    """The rows' condition, the filters as read (to echo and carry to the
    next page) and a sentence for each value that could not be read (that
    filter is left out). A new filter is one more entry here and one more
    field in the form."""
    condition, echoed, errors = Q(), {}, []
    user = params.get("user", "").strip()
    if user:
        condition &= Q(username=user)
        echoed["user"] = user
    namespace = params.get("namespace", "").strip()
    if namespace:
        # The rows about jobs in that namespace as it is now.
        if len(namespace) <= 100 and NAMESPACE_RE.fullmatch(namespace):
            condition &= Q(job__namespace=namespace)
            echoed["namespace"] = namespace
        else:
            errors.append(_("“{namespace}” is not a namespace.").format(namespace=namespace[:100]))
    job = params.get("job", "").strip()
    if job:
        condition &= Q(job_name=job_name(job))
        echoed["job"] = job
    for name, choices in (
        ("subject", AuditEvent.Subject.values),
        ("action", list(AuditEvent.ACTION_LABELS)),
        ("via", AuditEvent.Via.values),
    ):
        value = params.get(name, "")
        if value in choices:
            condition &= Q(**{name: value})
            echoed[name] = value
        elif value:
            errors.append(_("There is no such choice for “{name}”: {value}.").format(name=name, value=value))
    for name, lookup, end in (("since", "created_at__gte", False), ("until", "created_at__lt", True)):
        value = params.get(name, "").strip()
        if not value:
            continue
        moment = _instant(value, end=end)
        if moment is None:
            errors.append(
                _("“{value}” is not a date (YYYY-MM-DD) or a date and time (YYYY-MM-DD HH:MM).").format(
                    value=value
                )
            )
            continue
        condition &= Q(**{lookup: moment})
        echoed[name] = value
    return condition, echoed, errors


def audit_context(params) -> dict:
    condition, filters, errors = _filters(params)
    events = AuditEvent.objects.filter(condition)
    before = parse_run_cursor(params.get("before"))
    if before:
        events = events.filter(keyset_before("created_at", *before))  # audit_created_idx
    page = list(events.order_by("-created_at", "-id")[: EVENTS_PER_PAGE + 1])
    older = len(page) > EVENTS_PER_PAGE
    page = page[:EVENTS_PER_PAGE]
    return {
        "events": page,
        "filters": filters,
        "errors": errors,
        "subjects": AuditEvent.Subject.choices,
        "actions": [(value, str(label)) for value, label in AuditEvent.ACTION_LABELS.items()],
        "vias": AuditEvent.Via.choices,
        "filter_query": urlencode(filters),
        "older_query": urlencode({**filters, "before": run_cursor(page[-1].created_at, page[-1].pk)})
        if older
        else "",
        "deeper": before is not None,
    }


@login_required
@require_GET
def audit_list(request):
    """Who changed what, across all jobs, the settings and sign-ins."""
    if not access.can_see_audit(request.user):
        raise PermissionDenied(_("Only an administrator may do this."))
    return partial_or_page(request, "jobs/audit.html", "audit-list", audit_context(request.GET))
