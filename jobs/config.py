"""The config centre: typed settings stored in the Setting table and edited
in the console. Each key is declared once here with its type, default and
validation; read them with `get_setting(key)`."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email


def _positive_days(value: Any) -> int:
    if isinstance(value, bool):
        raise ValidationError("Enter a whole number of days.")
    try:
        days = int(str(value).strip())
    except ValueError:
        raise ValidationError("Enter a whole number of days.") from None
    if not 1 <= days <= 3650:
        raise ValidationError("Keep run history between 1 and 3650 days.")
    return days


def parse_email_list(value: Any) -> list[str]:
    """Accepts a list or a comma/semicolon/newline separated string; returns
    a de-duplicated list of valid addresses or raises with the bad one named."""
    if value is None:
        return []
    if isinstance(value, str):
        items = value.replace(";", ",").replace("\n", ",").split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise ValidationError("Enter email addresses separated by commas.")
    emails: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValidationError("Enter email addresses separated by commas.")
        item = item.strip()
        if not item:
            continue
        try:
            validate_email(item)
        except ValidationError:
            raise ValidationError(f"“{item}” is not a valid email address.") from None
        if item not in emails:
            emails.append(item)
    return emails


def _clean_channels(value: Any) -> list[str]:
    """Channel URLs as typed, or the stored tokens, → the stored tokens. A
    masked URL saved back unchanged keeps the stored channel (jobs.channels)."""
    from jobs import channels
    from jobs.models import Setting

    stored = Setting.objects.filter(key="sys.job.alertChannels").values_list("value", flat=True).first()
    return channels.clean_channels(value, stored or [])


def _show_channels(value: Any) -> str:
    from jobs import channels

    return "\n".join(channels.masked_list(value))


@dataclass(frozen=True)
class SettingSpec:
    key: str
    label: str
    default: Any
    clean: Callable[[Any], Any]
    help_text: str = ""
    # How the console shows the stored value (None: list items joined by commas).
    show: Callable[[Any], str] | None = None
    multiline: bool = False


SPECS: dict[str, SettingSpec] = {
    spec.key: spec
    for spec in [
        SettingSpec(
            key="sys.job.logRetentionDays",
            label="Run history retention (days)",
            default=30,
            clean=_positive_days,
            help_text="The built-in retention job deletes runs scheduled longer ago than this.",
        ),
        SettingSpec(
            key="sys.job.alertEmails",
            label="Alert emails",
            default=[],
            clean=parse_email_list,
            help_text="Who gets a crash alert when the job itself names no recipients.",
        ),
        SettingSpec(
            key="sys.job.alertChannels",
            label="Alert channels",
            default=[],
            clean=_clean_channels,
            help_text=(
                "Apprise URLs, one per line (slack://…, json://host/path …), for jobs that name no "
                "channels of their own. Secrets are masked once saved; leave a masked line as it is "
                "to keep it."
            ),
            show=_show_channels,
            multiline=True,
        ),
    ]
}


def get_setting(key: str) -> Any:
    from jobs.models import Setting

    spec = SPECS[key]
    row = Setting.objects.filter(key=key).values_list("value", flat=True).first()
    if row is None:
        return spec.default
    try:
        return spec.clean(row)
    except ValidationError:
        # A hand-edited row that no longer validates must not stop the scheduler.
        return spec.default


def set_setting(key: str, value: Any, *, user=None) -> Any:
    """Validate and store; raises ValidationError (and stores nothing) on bad input."""
    from django.utils import timezone

    from jobs.models import Setting

    spec = SPECS[key]
    cleaned = spec.clean(value)
    Setting.objects.update_or_create(
        key=key, defaults={"value": cleaned, "updated_at": timezone.now(), "updated_by": user}
    )
    return cleaned
