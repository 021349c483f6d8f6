"""The console's own forms: a new API token's name (the profile page) and
the config centre's keys (the settings page). A job's form is the domain's
(jobs.forms), shared by every door."""

from django import forms
from django.utils.translation import gettext as _

from jobs import services
from jobs.config import SPECS, get_setting
from jobs.formfields import StorableTextMixin
from jobs.forms import NAMESPACE_RE


class TokenForm(StorableTextMixin, forms.Form):
    """A new API token's name and how it is narrowed (the profile page):
    one namespace (blank: all its user's), reading only."""

    name = forms.CharField(max_length=100, required=False)
    namespace = forms.CharField(max_length=100, required=False)
    read_only = forms.BooleanField(required=False)

    def clean_namespace(self):
        namespace = self.cleaned_data["namespace"].strip()
        if namespace and not NAMESPACE_RE.fullmatch(namespace):
            raise forms.ValidationError(_("“{namespace}” is not a namespace.").format(namespace=namespace))
        return namespace or None


class SettingField(forms.Field):
    """One config-centre key, validated by its spec in jobs.config."""

    def __init__(self, spec, **kwargs):
        self.spec = spec
        if spec.choices:
            widget = forms.CheckboxSelectMultiple if spec.many else forms.Select
            kwargs.setdefault("widget", widget(choices=spec.choices))
        elif spec.multiline:
            kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3}))
        super().__init__(label=spec.label, help_text=spec.help_text, **kwargs)

    def to_python(self, value):
        return self.spec.clean(value)

    def prepare_value(self, value):
        if self.spec.choices:
            return value
        if self.spec.show is not None and isinstance(value, (list, tuple)):
            return self.spec.show(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(str(item) for item in value)
        return value


class SettingsForm(StorableTextMixin, forms.Form):
    """Every key of the config centre; saves only when all of them are valid."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, spec in SPECS.items():
            self.fields[key] = SettingField(spec, required=False, initial=get_setting(key))

    def save(self, *, user=None) -> None:
        """services.save_settings: DemoModeError in demo mode, nothing saved."""
        services.save_settings(values=self.cleaned_data, user=user)
