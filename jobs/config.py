"""The config centre: typed settings stored in the Setting table and edited
in the console. Each key is declared once here with its type, default and
validation; read them with `get_setting(key)`."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

# The languages of the pages, the alerts and the commands: settings.LANGUAGES.
LANGUAGE_CODES = tuple(code for code, _name in settings.LANGUAGES)


def _positive_days(value: Any) -> int:
    if isinstance(value, bool):
        raise ValidationError(_("Enter a whole number of days."))
    try:
        days = int(str(value).strip())
    except ValueError:
        raise ValidationError(_("Enter a whole number of days.")) from None
    if not 1 <= days <= 3650:
        raise ValidationError(_("Keep run history between 1 and 3650 days."))
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
        raise ValidationError(_("Enter email addresses separated by commas."))
    if any(not isinstance(item, str) for item in items):
        raise ValidationError(_("Enter email addresses separated by commas."))
    distinct = {item.strip() for item in items} - {""}
    if len(distinct) > MAX_EMAILS:
        # Counted before any address is checked: one crash must not mail thousands.
        raise ValidationError(
            _("At most {max_emails} alert email addresses (got {value:,}).").format(
                max_emails=MAX_EMAILS, value=len(distinct)
            ),
            code="too_many",
        )
    emails: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        try:
            validate_email(item)
        except ValidationError:
            raise ValidationError(_("“{item}” is not a valid email address.").format(item=item)) from None
        if item not in emails:
            emails.append(item)
    return emails


# The kinds of alert a job can ask for (jobs.alerts sends them).
ALERT_KINDS = ("crashed", "recovered", "failed", "late", "long_running", "calendar")
# How the console names them (the job form's and the settings page's boxes).
ALERT_KIND_LABELS = {
    "crashed": gettext_lazy("crashed"),
    "recovered": gettext_lazy("recovered"),
    "failed": gettext_lazy("failed"),
    "late": gettext_lazy("late"),
    "long_running": gettext_lazy("long running"),
    "calendar": gettext_lazy("calendar data missing"),
}
MIN_ALERT_SECONDS = 10
MAX_ALERT_SECONDS = 7 * 86_400


def parse_alert_kinds(value: Any) -> list[str]:
    """A list or a comma separated string of ALERT_KINDS → the kinds, in
    their canonical order; raises naming an unknown one."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        items = value.replace(";", ",").split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise ValidationError(_("Give the kinds of alert as a list."), code="invalid")
    wanted = set()
    for item in items:
        if not isinstance(item, str):
            raise ValidationError(_("Give the kinds of alert as a list of names."), code="invalid")
        item = item.strip().lower().replace("-", "_").replace(" ", "_")
        if not item:
            continue
        if item not in ALERT_KINDS:
            raise ValidationError(
                _("“{item}” is not a kind of alert; choose from {join}.").format(
                    item=item, join=", ".join(ALERT_KINDS)
                ),
                code="invalid",
            )
        wanted.add(item)
    return [kind for kind in ALERT_KINDS if kind in wanted]


def alert_seconds(value: Any, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool):
        raise ValidationError(_("Enter a whole number of seconds."), code="invalid")
    try:
        seconds = int(str(value).strip())
    except ValueError:
        raise ValidationError(_("Enter a whole number of seconds."), code="invalid") from None
    if allow_zero and seconds == 0:
        return 0
    if not MIN_ALERT_SECONDS <= seconds <= MAX_ALERT_SECONDS:
        raise ValidationError(
            _("Give between {min_alert_seconds} and {max_alert_seconds} seconds.").format(
                min_alert_seconds=MIN_ALERT_SECONDS, max_alert_seconds=MAX_ALERT_SECONDS
            ),
            code="invalid",
        )
    return seconds


def _ui_language(value: Any) -> str:
    """A language of settings.LANGUAGES (LANGUAGE_CODES; zh-Hans,
    zh_hans and zh-CN are read as zh-hans)."""
    if value in (None, ""):
        return settings.LANGUAGE_CODE
    if not isinstance(value, str):
        raise ValidationError(_("Choose en or zh-hans."), code="invalid")
    language = value.strip().lower().replace("_", "-")
    language = {"zh": "zh-hans", "zh-cn": "zh-hans", "zh-sg": "zh-hans"}.get(language, language)
    if language not in LANGUAGE_CODES:
        raise ValidationError(_("Choose en or zh-hans."), code="invalid")
    return language


def _clean_channels(value: Any) -> list[str]:
    """Names of alert channels (jobs.channelnames: a URL a channel has stands
    for that channel) → the names."""
    from jobs import channelnames

    return channelnames.clean_names(value)


def _channel_choices() -> list[tuple[str, str]]:
    from jobs import channelnames

    return channelnames.choices()


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
    # The values the key takes, with their labels: the console offers them
    # (a select; boxes to tick when `many`) instead of a box to type in.
    choices: tuple[tuple[str, Any], ...] = ()
    many: bool = False
    # Choices read when the form is made (rows that change: the alert channels).
    choices_from: Callable[[], list[tuple[str, Any]]] | None = None


SPECS: dict[str, SettingSpec] = {
    spec.key: spec
    for spec in [
        SettingSpec(
            key="sys.job.logRetentionDays",
            label=gettext_lazy("Run history retention (days)"),
            default=30,
            clean=_positive_days,
            help_text=gettext_lazy("The built-in retention job deletes runs scheduled longer ago than this."),
        ),
        SettingSpec(
            key="sys.job.rollupRetentionDays",
            label=gettext_lazy("Trends retention (days)"),
            default=400,
            clean=_positive_days,
            help_text=gettext_lazy(
                "The built-in retention job deletes the hourly trend figures (the dashboard's and job pages' trends) older than this; they outlive the runs they sum up."
            ),
        ),
        SettingSpec(
            key="sys.job.alertEmails",
            label=gettext_lazy("Alert emails"),
            default=[],
            clean=parse_email_list,
            help_text=gettext_lazy("Who gets a crash alert when the job itself names no recipients."),
        ),
        SettingSpec(
            key="sys.job.alertChannels",
            label=gettext_lazy("Alert channels"),
            default=[],
            clean=_clean_channels,
            help_text=gettext_lazy(
                "The named channels that alerts go to for jobs that tick none of their own; an administrator creates them under Alerts → Channels."
            ),
            choices_from=_channel_choices,
            many=True,
        ),
        SettingSpec(
            key="sys.job.alertOn",
            label=gettext_lazy("Kinds of alert"),
            default=["crashed"],
            clean=parse_alert_kinds,
            help_text=gettext_lazy(
                "For jobs that tick none. Failed: every failed fire; late: a fire not started in time; long running: a run still going; calendar data missing: a job's calendar has no data for the coming month."
            ),
            choices=tuple(ALERT_KIND_LABELS.items()),
            many=True,
        ),
        SettingSpec(
            key="sys.job.lateAfterSeconds",
            label=gettext_lazy("Late after (seconds)"),
            default=300,
            clean=lambda value: 300 if value in (None, "") else alert_seconds(value),
            help_text=gettext_lazy("A `late` alert when a fire has not started this long after its time."),
        ),
        SettingSpec(
            key="sys.job.longRunningSeconds",
            label=gettext_lazy("Long running after (seconds)"),
            default=0,
            clean=lambda value: 0 if value in (None, "") else alert_seconds(value, allow_zero=True),
            help_text=gettext_lazy(
                "A `long_running` alert when a run is still going after this long; 0: half its timeout."
            ),
        ),
        SettingSpec(
            key="sys.ui.language",
            label=gettext_lazy("Alert language"),
            default=settings.LANGUAGE_CODE,
            clean=_ui_language,
            help_text=gettext_lazy(
                "The language of alert emails and channel messages; the console follows each user's own choice."
            ),
            choices=tuple(settings.LANGUAGES),
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


def get_stored(key: str) -> Any:
    """The value as stored, not cleaned again (the alert channels: read in the
    scheduler's transactions, where cleaning a hand-written URL would mean a
    DNS lookup)."""
    from jobs.models import Setting

    row = Setting.objects.filter(key=key).values_list("value", flat=True).first()
    return SPECS[key].default if row is None else row


_CACHE: dict[str, tuple[float, Any]] = {}


def get_setting_cached(key: str, *, ttl: float = 5.0) -> Any:
    """get_setting, read at most once per `ttl` seconds by this process (for
    the scheduler's hot path; a change made elsewhere is seen within `ttl`)."""
    import time

    hit = _CACHE.get(key)
    if hit is not None and 0 <= time.monotonic() - hit[0] < ttl:
        return hit[1]
    value = get_setting(key)
    _CACHE[key] = (time.monotonic(), value)
    return value


def set_setting(key: str, value: Any, *, user=None) -> Any:
    """Validate and store; raises ValidationError (and stores nothing) on bad input."""
    from django.utils import timezone

    from jobs.models import Setting

    spec = SPECS[key]
    cleaned = spec.clean(value)
    Setting.objects.update_or_create(
        key=key, defaults={"value": cleaned, "updated_at": timezone.now(), "updated_by": user}
    )
    _CACHE.pop(key, None)
    return cleaned
