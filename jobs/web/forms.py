"""The console's own forms: a new API token's name (the profile page), the
config centre's keys (the settings page) and a two-factor code. A job's form is the domain's
(jobs.forms), shared by every door."""

from django import forms
from django.utils.translation import gettext as _

from jobs import services, twofactor
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
        if spec.multiline:
            kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3}))
        super().__init__(label=spec.label, help_text=spec.help_text, **kwargs)

    def to_python(self, value):
        return self.spec.clean(value)

    def prepare_value(self, value):
        if self.spec.show is not None and isinstance(value, (list, tuple)):
            return self.spec.show(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(str(item) for item in value)
        return value


class SettingsForm(StorableTextMixin, forms.Form):
    """Every key of the config centre; saves only when all of them are valid.
    A key the posted form does not carry at all keeps its value (a page
    from before a release added a key, a script posting some keys); a key
    sent empty is validated as typed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, spec in SPECS.items():
            self.fields[key] = SettingField(spec, required=False, initial=get_setting(key))
            if self.is_bound and key not in self.data:
                self.fields[key].disabled = True  # Django then cleans the initial value

    def save(self, *, user=None) -> None:
        """services.save_settings: DemoModeError in demo mode, nothing saved."""
        services.save_settings(values=self.cleaned_data, user=user)


class TwoFactorCodeForm(StorableTextMixin, forms.Form):
    """A code from an authenticator app, or a recovery code (the second step
    of a sign-in, confirming a new app, turning two-factor off)."""

    code = forms.CharField(
        label=_("Code"),
        max_length=twofactor.MAX_CODE_LENGTH,
        strip=True,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autofocus": True, "spellcheck": "false"}
        ),
    )
