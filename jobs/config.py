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


MAX_EMAILS = 20


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
    if any(not isinstance(item, str) for item in items):
        raise ValidationError("Enter email addresses separated by commas.")
    distinct = {item.strip() for item in items} - {""}
    if len(distinct) > MAX_EMAILS:
        # Counted before any address is checked: one crash must not mail thousands.
        raise ValidationError(
            f"At most {MAX_EMAILS} alert email addresses (got {len(distinct):,}).", code="too_many"
        )
    emails: list[str] = []
    for item in items:
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


@dataclass(frozen=True)
class SettingSpec:
    key: str
    label: str
    default: Any
    clean: Callable[[Any], Any]
    help_text: str = ""


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
