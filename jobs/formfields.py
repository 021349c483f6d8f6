"""The form fields and mixins the forms share: a job's properties, alert
recipients, channels and kinds, its upstreams (`after`), text every database
stores, and the API's error shape."""

import json

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.utils.translation import gettext_lazy

from jobs import channels
from jobs.config import ALERT_KINDS, parse_alert_kinds, parse_email_list
from jobs.properties import coerce_properties
from jobs.text import validate_storable
from jobs.workflows import coerce_after


class StorableTextMixin:
    """Every field of the form refuses text no database stores (NUL, lone
    surrogates; jobs.text), in its value and, for properties, in names and
    values at any depth: the same error on SQLite and PostgreSQL, from the
    console, the API and `jobs import` alike. Checked before the field's
    own clean_<field>, which may look the value up in the database."""

    def full_clean(self):
        # Here rather than in __init__: some forms add fields after it.
        # Django's own NUL check on text fields gives way to this one, so a
        # NUL is one error with one code wherever it is.
        for field in self.fields.values():
            if validate_storable not in field.validators:
                field.validators = [
                    *(v for v in field.validators if not isinstance(v, ProhibitNullCharactersValidator)),
                    validate_storable,
                ]
        super().full_clean()


class ErrorListMixin:
    def error_list(self) -> list[dict]:
        """[{code, message, field}] — the API's and the import's error shape."""
        out = []
        for field, errors in self.errors.as_data().items():
            for error in errors:
                for message in error.messages:
                    out.append(
                        {
                            "code": error.code or "invalid",
                            "message": message,
                            "field": None if field == "__all__" else field,
                        }
                    )
        return out


class PropertiesField(forms.Field):
    widget = forms.Textarea

    def to_python(self, value):
        return coerce_properties(value)

    def prepare_value(self, value):
        if isinstance(value, dict):
            return json.dumps(value, indent=2, sort_keys=True)
        return value


class EmailListField(forms.Field):
    def to_python(self, value):
        return parse_email_list(value)

    def prepare_value(self, value):
        if isinstance(value, (list, tuple)):
            return ", ".join(value)
        return value


class ChannelListField(forms.Field):
    """Apprise URLs, one per line (or a list from the API). Cleaned into
    stored tokens by JobForm.clean_alert_channels, which knows the stored ones."""

    widget = forms.Textarea

    def to_python(self, value):
        return channels._as_items(value)

    def prepare_value(self, value):
        if isinstance(value, (list, tuple)):
            return "\n".join(channels.mask(channels.reveal(item) or item) for item in value)
        return value


# The console's names for the kinds of alert (jobs.config.ALERT_KINDS).
ALERT_KIND_LABELS = {
    "crashed": gettext_lazy("crashed"),
    "recovered": gettext_lazy("recovered"),
    "failed": gettext_lazy("failed"),
    "late": gettext_lazy("late"),
    "long_running": gettext_lazy("long running"),
    "calendar": gettext_lazy("calendar data missing"),
}


class AlertKindsField(forms.Field):
    """The kinds of alert a job asks for (checkboxes in the console, a list in
    the API and the jobs-as-code file). Empty: the sys.job.alertOn setting."""

    widget = forms.CheckboxSelectMultiple(choices=[(kind, ALERT_KIND_LABELS[kind]) for kind in ALERT_KINDS])

    def to_python(self, value):
        return parse_alert_kinds(value)


class AfterField(forms.Field):
    widget = forms.Textarea

    def to_python(self, value):
        return coerce_after(value)

    def prepare_value(self, value):
        if isinstance(value, list):
            return json.dumps(value, indent=2)
        return value
