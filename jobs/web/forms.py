"""The console's own forms: a new API token's name (the profile page), the
config centre's keys (the settings page), a two-factor code, and a role to
grant (the roles page). A job's form is the domain's (jobs.forms), shared
by every door."""

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs import services, twofactor
from jobs.config import SPECS, get_setting
from jobs.formfields import StorableTextMixin
from jobs.forms import NAMESPACE_RE
from jobs.models import Role


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
        choices = spec.choices_from() if spec.choices_from is not None else spec.choices
        if spec.choices_from is not None or choices:
            widget = forms.CheckboxSelectMultiple if spec.many else forms.Select
            kwargs.setdefault("widget", widget(choices=choices))
        elif spec.multiline:
            kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3}))
        super().__init__(label=spec.label, help_text=spec.help_text, **kwargs)

    def to_python(self, value):
        return self.spec.clean(value)

    def prepare_value(self, value):
        if self.spec.choices or self.spec.choices_from is not None:
            return value
        if self.spec.show is not None and isinstance(value, (list, tuple)):
            return self.spec.show(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(str(item) for item in value)
        return value


class SettingsForm(StorableTextMixin, forms.Form):
    """Every key of the config centre; saves only when all of them are valid.
    A key the posted form does not carry at all keeps its value (a page
    from before a release added a key, a script posting some keys); a key
    sent empty is validated as typed. The console's page names every key it
    shows in SENT_KEYS, so boxes all unticked (which a browser does not
    send) mean none rather than "not sent"."""

    SENT_KEYS = "sent_keys"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        shown = set(self.data.getlist(self.SENT_KEYS)) if hasattr(self.data, "getlist") else set()
        for key, spec in SPECS.items():
            self.fields[key] = SettingField(spec, required=False, initial=get_setting(key))
            if self.is_bound and key not in self.data and key not in shown:
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


class RoleGrantForm(StorableTextMixin, forms.Form):
    """A role to grant a user or a group, everywhere or in one namespace (the
    roles page); jobs.roles writes it. `holder` is cleaned to the user or
    the group named."""

    holder_type = forms.ChoiceField(
        choices=[("user", gettext_lazy("User")), ("group", gettext_lazy("Group"))],
        label=gettext_lazy("Grant to"),
    )
    holder = forms.CharField(max_length=150, label=gettext_lazy("User or group name"))
    role = forms.ChoiceField(choices=Role.choices, label=gettext_lazy("Role"))
    namespace = forms.CharField(
        max_length=100,
        required=False,
        label=gettext_lazy("Namespace"),
        help_text=gettext_lazy("Empty: everywhere."),
    )

    def clean_namespace(self):
        namespace = self.cleaned_data["namespace"].strip()
        if namespace and not NAMESPACE_RE.fullmatch(namespace):
            raise forms.ValidationError(_("“{namespace}” is not a namespace.").format(namespace=namespace))
        return namespace or None

    def clean(self):
        data = super().clean()
        name, kind = data.get("holder", "").strip(), data.get("holder_type")
        if not name or not kind:
            return data
        if kind == "user":
            found = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: name}).first()
            message = _("No user “{name}”.")
        else:
            found = Group.objects.filter(name=name).first()
            message = _("No group “{name}”.")
        if found is None:
            self.add_error("holder", forms.ValidationError(message.format(name=name), code="invalid"))
        else:
            data["holder"] = found
        return data
