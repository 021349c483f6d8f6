"""Job validation: the one place that decides whether a job is valid. The
console's form, the JSON API and `manage.py jobs import` all go through
JobForm, so a rule written here holds everywhere. Each kind's own rules are
jobs.kinds' table, a job's properties jobs.properties', its upstreams
jobs.workflows'; the fields the forms share are in jobs.formfields.

Errors carry the spec's codes where it has one (47003 both day fields,
47004 interval below 5 s, …) as the ValidationError code.
"""

import unicodedata
from datetime import UTC, datetime

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs import calendars, cron, formfields, kinds, refusals, tasks, workflows
from jobs.config import alert_seconds
from jobs.formfields import (
    AfterField,
    AlertKindsField,
    ChannelNamesField,
    EmailListField,
    ErrorListMixin,
    PropertiesField,
    StorableTextMixin,
)
from jobs.handlers import registry
from jobs.i18n import cron_error_message
from jobs.kinds import PROPERTY_FIELDS
from jobs.models import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    NAMESPACE_RE,
    Job,
    job_name,
)
from jobs.overlapfields import OverlapFieldsMixin
from jobs.shardfields import ShardFieldsMixin

MAX_ALERT_THRESHOLD = 1000
MAX_RETRIES = 100
MAX_DESCRIPTION_CHARS = 2000
# Characters that make one name look like another or hide part of it:
# controls (Cc), format characters such as bidi overrides and zero-width
# spaces/joiners (Cf), line/paragraph separators, private-use, surrogate and
# unassigned code points. Spaces other than U+0020 (no-break, ideographic,
# …) are refused as well: they look like a plain space.
HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


# Instants a client may name (a task's start, a filter, a preview's start):
# wide enough for any real use, far enough from datetime's limits that
# converting zones or adding a schedule's step cannot overflow.
EARLIEST_INSTANT = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)


def check_instant(value: datetime) -> datetime:
    """An aware datetime within the allowed range, in UTC; else ValidationError."""
    try:
        value = value.astimezone(UTC)
    except (OverflowError, ValueError):
        value = None
    if value is None or not EARLIEST_INSTANT <= value <= LATEST_INSTANT:
        raise ValidationError(_("Give a date-time between the years 1900 and 9000."), code="out_of_range")
    return value


def check_interval(seconds) -> int:
    """An interval job's seconds: a whole number from the floor (47004) to
    Job.MAX_INTERVAL_SECONDS. Raises ValidationError with the code."""
    try:
        seconds = cron.validate_interval(seconds)
    except cron.CronError as exc:
        raise ValidationError(cron_error_message(exc), code=str(exc.code)) from None
    if seconds > Job.MAX_INTERVAL_SECONDS:
        raise ValidationError(
            _(
                "The interval can be at most {max_interval_seconds:,} seconds (366 days); use a cron schedule for rarer jobs."
            ).format(max_interval_seconds=Job.MAX_INTERVAL_SECONDS),
            code="invalid",
        )
    return seconds


def _no_constraint_queries(exclude=None, using=None):
    """Stands in for Model.validate_constraints in JobForm._post_clean."""


class JobForm(StorableTextMixin, ErrorListMixin, ShardFieldsMixin, OverlapFieldsMixin, forms.ModelForm):
    """Create or edit a job. Pass `user` (None = a trusted caller such as the
    shell) so SQL jobs can be limited to superusers."""

    properties = PropertiesField(required=False, label=gettext_lazy("Properties"))
    after = AfterField(
        required=False,
        label=gettext_lazy("Runs after"),
        help_text=gettext_lazy(
            'Upstream jobs, a JSON list: `[{"job": "name", "on": "success"}]` — `on` is `success`, `failure` or `finish`. Each final run of an upstream that matches starts this job once.'
        ),
    )
    alert_emails = EmailListField(required=False, label=gettext_lazy("Alert emails"))
    alert_channels = ChannelNamesField(required=False, label=gettext_lazy("Alert channels"))
    alert_on = AlertKindsField(required=False, label=gettext_lazy("Alert on"))
    interval_seconds = formfields.IntervalField(required=False, label=gettext_lazy("Every (seconds)"))
    version = forms.IntegerField(required=False, widget=forms.HiddenInput)
    # Convenience fields for HTTP and SQL jobs; merged into properties.
    url = forms.CharField(required=False, max_length=2000, label=gettext_lazy("URL"))
    method = forms.CharField(required=False, max_length=10)
    headers = forms.CharField(required=False, widget=forms.Textarea)
    body = forms.CharField(required=False, widget=forms.Textarea, strip=False)
    sql = forms.CharField(required=False, widget=forms.Textarea, label=gettext_lazy("SQL statement"))

    # The console's page (templates/jobs/job_form.html) places each of these fields by name, in
    # its sections. Every other field renders after them in the page's generic loop
    # (unplaced_fields): notify_recovered, and a field added later until the page places it.
    PLACED_FIELDS = calendars.FORM_FIELDS | frozenset(
        {
            "version",
            "name",
            "namespace",
            "description",
            "kind",
            "handler",
            "url",
            "method",
            "headers",
            "body",
            "sql",
            "sql_write",
            "properties",
            "schedule_type",
            "timezone",
            "cron_expression",
            "interval_seconds",
            "misfire_policy",
            "state",
            "run_once",
            "after",
            "max_retries",
            "retry_interval_seconds",
            "timeout_seconds",
            "alert_threshold",
            "alert_emails",
            "alert_channels",
            "alert_on",
            "late_after_seconds",
            "long_running_seconds",
        }
    )

    class Meta:
        model = Job
        fields = Job.EDITABLE_FIELDS
        labels = {
            "name": gettext_lazy("Name"),
            "description": gettext_lazy("Description"),
            "namespace": gettext_lazy("Namespace"),
            "cron_expression": gettext_lazy("Cron expression"),
            "timezone": gettext_lazy("Timezone"),
            "notify_recovered": gettext_lazy("Notify recovered"),
            "state": gettext_lazy("State"),
            "kind": gettext_lazy("Kind"),
            "handler": gettext_lazy("Handler"),
            "sql_write": gettext_lazy("Allow the statement to write"),
            "schedule_type": gettext_lazy("Schedule"),
            "misfire_policy": gettext_lazy("When a fire was missed"),
            "run_once": gettext_lazy("Run once, then disable"),
            "max_retries": gettext_lazy("Retries"),
            "retry_interval_seconds": gettext_lazy("Retry after (seconds)"),
            "timeout_seconds": gettext_lazy("Timeout (seconds)"),
            "alert_threshold": gettext_lazy("Alert after this many failed fires in a row"),
            "late_after_seconds": gettext_lazy("Late after (seconds)"),
            "long_running_seconds": gettext_lazy("Long running after (seconds)"),
        }

    def __init__(self, *args, user=None, workflow=None, **kwargs):
        self.user = user
        # `jobs import`: a Workflow of the file's jobs, which are saved
        # together: they count as existing, with these edges.
        self.workflow = workflow or {}
        super().__init__(*args, **kwargs)
        self.fields["handler"].widget = forms.Select(choices=self.handler_choices())
        self.fields["state"].choices = [
            (Job.State.ENABLED, _("Enabled")),
            (Job.State.PAUSED, _("Paused")),
        ] + ([(Job.State.CRASHED, _("Crashed"))] if self.instance.state == Job.State.CRASHED else [])
        self.fields["state"].required = False
        # Left out, these take the model's defaults (an import file or an API
        # body need not spell out every knob).
        for name in (
            "kind",
            "schedule_type",
            "misfire_policy",
            "timezone",
            "max_retries",
            "retry_interval_seconds",
            "timeout_seconds",
            "alert_threshold",
        ):
            self.fields[name].required = False
        self.fields["timeout_seconds"].min_value = 1
        self.fields["max_retries"].widget.attrs["max"] = MAX_RETRIES
        if self.instance.pk:
            self.fields["version"].initial = self.instance.version
            for name in PROPERTY_FIELDS:
                self.fields[name].initial = (self.instance.properties or {}).get(name, "")

    def _post_clean(self):
        # Django validates the model's constraints here, a query each: a live
        # name's uniqueness and the schedule's and the timeout's checks. This
        # form's own clean methods have said the same things already, with
        # their codes. The constraints stay the guard against a drift between
        # the two for a form that found nothing wrong; once it has found
        # something, the answer is a refusal either way, and those queries were
        # a large share of the API's time on invalid input.
        if self._errors:
            self.instance.validate_constraints = _no_constraint_queries
        try:
            super()._post_clean()
        finally:
            self.instance.__dict__.pop("validate_constraints", None)

    def unplaced_fields(self) -> list:
        """The bound fields the console's page shows in its generic loop."""
        return [self[name] for name in self.fields if name not in self.PLACED_FIELDS]

    @staticmethod
    def handler_choices():
        return [("", "—")] + [
            (h.name, f"{h.label} ({h.name})" if h.label != h.name else h.name) for h in registry.available()
        ]

    # -- fields ------------------------------------------------------------------

    def clean_name(self):
        # Stored as every door looks it up (job_name: NFC), so uniqueness holds.
        name = job_name(self.cleaned_data.get("name") or "")
        if not name:
            raise ValidationError(_("Give the job a name."), code="required")
        hidden = sorted(
            {
                f"U+{ord(c):04X}"
                for c in name
                if unicodedata.category(c) in HIDDEN_CATEGORIES or (c.isspace() and c != " ")
            }
        )
        if hidden:
            raise ValidationError(
                _(
                    "A job name cannot contain control, bidi-override, zero-width, other invisible characters or spaces other than the plain space characters (found {join})."
                ).format(join=", ".join(hidden[:5])),
                code="invalid_characters",
            )
        clash = Job.objects.live().filter(name=name).exclude(pk=self.instance.pk)
        if clash.exists():
            raise ValidationError(_("A job named “{name}” already exists.").format(name=name), code="unique")
        return name

    def clean_description(self):
        description = self.cleaned_data.get("description") or ""
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise ValidationError(
                _(
                    "The description can be at most {max_description_chars:,} characters (it has {value:,})."
                ).format(max_description_chars=MAX_DESCRIPTION_CHARS, value=len(description)),
                code="max_length",
            )
        return description

    def clean_namespace(self):
        namespace = (self.cleaned_data.get("namespace") or "").strip()
        if namespace and not NAMESPACE_RE.fullmatch(namespace):
            raise ValidationError(
                _("A namespace is lower-case letters, digits, “-” and “_”, starting with a letter or digit."),
                code="invalid",
            )
        return namespace

    def clean_kind(self):
        return self.cleaned_data.get("kind") or Job.Kind.PYTHON

    def clean_schedule_type(self):
        return self.cleaned_data.get("schedule_type") or Job.ScheduleType.CRON

    def clean_misfire_policy(self):
        return self.cleaned_data.get("misfire_policy") or Job.MisfirePolicy.SKIP

    def clean_state(self):
        state = self.cleaned_data.get("state")
        if self.instance.pk and not state:
            return self.instance.state
        return state or Job.State.ENABLED

    def clean_timezone(self):
        # Stored in the canonical spelling (europe/berlin → Europe/Berlin).
        try:
            return cron.zone_name(self.cleaned_data.get("timezone"))
        except cron.CronError as exc:
            raise ValidationError(cron_error_message(exc), code=str(exc.code)) from None

    def clean_timeout_seconds(self):
        value = self.cleaned_data.get("timeout_seconds")
        if value is None:
            return DEFAULT_TIMEOUT_SECONDS
        if not 1 <= value <= Job.MAX_TIMEOUT_SECONDS:
            raise ValidationError(
                _("The timeout must be between 1 and {max_timeout_seconds:,} seconds (24 hours).").format(
                    max_timeout_seconds=Job.MAX_TIMEOUT_SECONDS
                ),
                code="invalid",
            )
        return value

    def clean_max_retries(self):
        value = self.cleaned_data.get("max_retries")
        if value is None:
            return DEFAULT_MAX_RETRIES
        if value > MAX_RETRIES:
            raise ValidationError(
                _("At most {max_retries} retries.").format(max_retries=MAX_RETRIES), code="invalid"
            )
        return value

    def clean_retry_interval_seconds(self):
        value = self.cleaned_data.get("retry_interval_seconds")
        if value is None:
            return DEFAULT_RETRY_INTERVAL_SECONDS
        if value > Job.MAX_TIMEOUT_SECONDS:
            raise ValidationError(
                _("The retry interval can be at most {max_timeout_seconds:,} seconds (24 hours).").format(
                    max_timeout_seconds=Job.MAX_TIMEOUT_SECONDS
                ),
                code="invalid",
            )
        return value

    def clean_late_after_seconds(self):
        value = self.cleaned_data.get("late_after_seconds")
        return None if value is None else alert_seconds(value)

    def clean_long_running_seconds(self):
        value = self.cleaned_data.get("long_running_seconds")
        return None if value is None else alert_seconds(value)

    def clean_alert_threshold(self):
        value = self.cleaned_data.get("alert_threshold")
        if value is not None and value > MAX_ALERT_THRESHOLD:
            raise ValidationError(
                _("The alert threshold can be at most {max_alert_threshold}.").format(
                    max_alert_threshold=MAX_ALERT_THRESHOLD
                ),
                code="invalid",
            )
        return DEFAULT_ALERT_THRESHOLD if value is None else value

    # -- the whole job -------------------------------------------------------------

    def clean(self):
        data = super().clean()
        self._clean_schedule(data)
        calendars.clean_job_fields(self, data)
        self._clean_handler(data)
        self._clean_after(data)
        self._demo_mode_refusal(data)
        long_running, timeout = data.get("long_running_seconds"), data.get("timeout_seconds")
        if long_running is not None and timeout is not None and long_running >= timeout:
            self.add_error(
                "long_running_seconds",
                ValidationError(
                    _("A long-running alert must come before the timeout ({timeout} s).").format(
                        timeout=timeout
                    ),
                    code="invalid",
                ),
            )
        return data

    def _clean_schedule(self, data):
        if data.get("schedule_type") == Job.ScheduleType.NONE:
            # Runs only by hand or after an upstream job: no schedule fields.
            data["cron_expression"] = ""
            data["interval_seconds"] = None
            return
        if data.get("schedule_type") == Job.ScheduleType.INTERVAL:
            seconds = data.get("interval_seconds")
            if seconds is None and "interval_seconds" not in self.errors:
                self.add_error(
                    "interval_seconds", ValidationError(_("Enter the interval in seconds."), code="required")
                )
            elif seconds is not None:
                try:
                    data["interval_seconds"] = check_interval(seconds)
                except ValidationError as exc:
                    self.add_error("interval_seconds", exc)
            data["cron_expression"] = ""
        else:
            expression = (data.get("cron_expression") or "").strip()
            if not expression:
                self.add_error(
                    "cron_expression", ValidationError(_("Enter a cron expression."), code="required")
                )
                return
            try:
                data["cron_expression"] = cron.normalize(expression)
            except cron.CronError as exc:
                self.add_error(
                    "cron_expression", ValidationError(cron_error_message(exc), code=str(exc.code))
                )
            data["interval_seconds"] = None

    def _clean_after(self, data):
        """The graph's rules (jobs.workflows: 47007 to 47010), here for the
        answer a person reads; services.save_job asks again under the lock."""
        after = data.get("after") or []
        name = job_name(data.get("name") or self.instance.name or "")
        if not after or not name:
            return
        error = workflows.refusal(
            name=name,
            upstreams=[item["job"] for item in after],
            stored_name=self.instance.name if self.instance.pk else None,
            workflow=self.workflow,
        )
        if error is not None:
            self.add_error("after", error)

    def _demo_mode_refusal(self, data):
        """What demo mode refuses in the fields (refusals.check_demo_job_fields),
        as an error on the field that asked for it; services.save_job asks again."""
        if any(name in self.errors for name in refusals.DEMO_JOB_FIELDS):
            return
        try:
            refusals.check_demo_job_fields(
                before=refusals.demo_job_fields(self.instance) if self.instance.pk else None,
                after={name: data.get(name) for name in refusals.DEMO_JOB_FIELDS},
            )
        except refusals.DemoModeError as exc:
            self.add_error(exc.field, ValidationError(str(exc), code="demo_mode"))

    def _job_change_refusal(self, kind) -> bool:
        """Ask refusals.check_job_change; its answer goes on `kind` or the field it names."""
        old = self.instance if self.instance.pk else None
        namespaces = [self.cleaned_data.get("namespace"), old and old.namespace]
        try:
            refusals.check_job_change(
                kinds=[kind, old and old.kind], user=self.user, action="create or edit", namespaces=namespaces
            )
        except refusals.DemoModeError as exc:
            self.add_error("kind", ValidationError(str(exc), code="demo_mode"))
        except refusals.ForbiddenError as exc:
            self.add_error(exc.field or "kind", ValidationError(str(exc), code="forbidden"))
        else:
            return False
        return True

    def _builtin_handler_refusal(self, kind, handler) -> bool:
        """A built-in job (the Retention job) keeps its kind and handler: its
        schedule, timeout and alerts are the operator's, what it runs is not.
        True (and the error on `handler`) if this change would alter them."""
        job = self.instance
        if not (job.pk and job.builtin):
            return False
        if (kind or Job.Kind.PYTHON) == job.kind and handler == job.handler:
            return False
        self.add_error(
            "handler",
            ValidationError(
                _("“{name}” is a built-in job: its kind and handler ({handler}) cannot be changed.").format(
                    name=job.name, handler=job.handler
                ),
                code="builtin_handler",
            ),
        )
        return True

    def _clean_handler(self, data):
        kind = data.get("kind")
        properties = dict(data.get("properties") or {})
        # Who may make this change (demo mode included) is services' answer,
        # asked first; whether the server runs the kind at all comes after.
        if self._job_change_refusal(kind):
            data["properties"] = properties
            return
        row = kinds.KINDS.get(kind)
        if row is not None and row.off_message and not row.enabled():
            self.add_error("kind", ValidationError(str(row.off_message), code=f"{kind}_disabled"))
            data["properties"] = properties
            return
        handler = (data.get("handler") or "").strip()
        if self._builtin_handler_refusal(kind, handler):
            data["properties"] = properties
            return
        if kind == Job.Kind.PYTHON and not handler:
            self.add_error("handler", ValidationError(_("Choose a handler."), code="required"))
        elif handler and not registry.is_registered(handler) and handler != self.instance.handler:
            # Checked for every kind (another kind ignores it, but an unknown
            # name is still refused); a job whose class disappeared stays
            # editable under its old name.
            self.add_error(
                "handler",
                ValidationError(
                    _("No handler named “{handler}” is registered.").format(handler=handler),
                    code="invalid",
                ),
            )
        if row is not None and row.handler:
            # The kind's own handler runs it: a named one is not kept.
            data["handler"] = ""
        for name in row.fields if row is not None else ():
            if data.get(name):
                properties[name] = data[name]
        for name, value in row.defaults if row is not None else ():
            properties.setdefault(name, value)
        namespace, sql_write = data.get("namespace", ""), bool(data.get("sql_write"))
        for field, error in kinds.property_errors(kind, properties, sql_write=sql_write, namespace=namespace):
            self.add_error(field if field in self.fields else "properties", error)
        data["properties"] = properties

    def save(self, commit=True):
        job = super().save(commit=False)
        job.properties = self.cleaned_data["properties"]
        if commit:
            raise TypeError("save jobs with jobs.services.save_job(job=form.save(commit=False), …)")
        return job


class TaskForm(StorableTextMixin, ErrorListMixin, forms.Form):
    """A one-off task for `tasks.enqueue` (the API's POST /api/tasks)."""

    handler = forms.CharField(max_length=200)
    key = forms.CharField(max_length=200)
    properties = PropertiesField(required=False)
    run_after = forms.DateTimeField(required=False)
    max_retries = forms.IntegerField(required=False, min_value=0, max_value=MAX_RETRIES)
    retry_interval_seconds = forms.IntegerField(
        required=False, min_value=0, max_value=Job.MAX_TIMEOUT_SECONDS
    )
    timeout_seconds = forms.IntegerField(required=False, min_value=1, max_value=Job.MAX_TIMEOUT_SECONDS)

    def clean_run_after(self):
        value = self.cleaned_data.get("run_after")
        return None if value is None else check_instant(value)

    def clean_handler(self):
        handler = self.cleaned_data["handler"]
        if not registry.is_registered(handler):
            raise ValidationError(
                _("No handler named “{handler}” is registered.").format(handler=handler), code="invalid"
            )
        return handler

    def task_request(self):
        data = self.cleaned_data
        return tasks.TaskRequest(
            handler=data["handler"],
            key=data["key"],
            properties=data.get("properties") or {},
            run_after=data.get("run_after"),
            max_retries=DEFAULT_MAX_RETRIES if data.get("max_retries") is None else data["max_retries"],
            retry_interval_seconds=DEFAULT_RETRY_INTERVAL_SECONDS
            if data.get("retry_interval_seconds") is None
            else data["retry_interval_seconds"],
            timeout_seconds=DEFAULT_TIMEOUT_SECONDS
            if data.get("timeout_seconds") is None
            else data["timeout_seconds"],
        )
