"""The form fields and mixins the forms share: a job's properties, alert
recipients, channels and kinds, its upstreams (`after`), text every database
stores, and the API's error shape; and the secret's form, which uses them."""

import json

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.utils.translation import gettext_lazy

from jobs import channelnames, secrets
from jobs.config import ALERT_KIND_LABELS, ALERT_KINDS, parse_alert_kinds, parse_email_list
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


class ChannelNamesField(forms.Field):
    """Named alert channels, ticked (the console) or listed (the API, an
    import: a URL stands for the channel that has it): jobs.channelnames."""

    widget = forms.CheckboxSelectMultiple

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.widget.choices = channelnames.choices  # read when the form is shown

    def to_python(self, value):
        return channelnames.clean_names(value)


# The console's names for the kinds of alert (jobs.config.ALERT_KINDS).
class IntervalField(forms.IntegerField):
    """An interval job's seconds: a whole number, and nothing more here. The
    model's column is unsigned, whose form field would refuse -5 with "greater
    than or equal to 0" before the job's own check said the floor (47004):
    jobs.forms.check_interval says every bound, once, with its code."""

    def __init__(self, **kwargs):
        super().__init__(min_value=None, max_value=None, **kwargs)


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


class SecretForm(StorableTextMixin, ErrorListMixin, forms.Form):
    """A secret to create or replace (jobs.secrets): the console's form, the
    API's body."""

    name = forms.CharField(max_length=100, label=gettext_lazy("Name"))
    value = forms.CharField(
        strip=False,
        label=gettext_lazy("Value"),
        # Never pre-filled: the value is not read back, not even into the form.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    description = forms.CharField(
        max_length=secrets.MAX_DESCRIPTION_CHARS, required=False, label=gettext_lazy("Description")
    )
    namespaces = forms.CharField(
        required=False,
        max_length=secrets.MAX_NAMESPACES * 101,
        label=gettext_lazy("Namespaces that may use it"),
        help_text=gettext_lazy(
            "Separated by commas; the jobs of other namespaces may not reference it. Empty: every namespace."
        ),
    )

    def clean_name(self):
        return secrets.check_name(self.cleaned_data["name"])

    def clean_value(self):
        return secrets.check_value(self.cleaned_data["value"])

    def clean_description(self):
        return secrets.check_description(self.cleaned_data["description"])

    def clean_namespaces(self):
        return secrets.check_namespaces(self.cleaned_data["namespaces"])
