"""Named alert channels as administrators change them: create or edit
(`save_channel`), delete (`delete_channel`, refused while a job or the
global setting names the channel), each audited (subject "channels") and
refused in demo mode. Which channels an alert goes to is jobs.alerts'."""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from jobs import audit, channels, text
from jobs.channelnames import CODE_CHANNEL_IN_USE, CODE_CHANNEL_NAME, NAME_RE
from jobs.config import get_stored, parse_alert_kinds
from jobs.models import AlertChannel, AuditEvent, Job
from jobs.refusals import CodedRefusal, ServiceError, check_demo_mode, require_admin


class ChannelRefused(CodedRefusal):
    """A channel change that is not allowed."""


def _check_may_change(user) -> None:
    require_admin(user, gettext_noop("change alert channels"))
    check_demo_mode("changing alert channels")


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ChannelRefused(
            _(
                "A channel's name is up to 100 lower-case letters, digits, “-” and “_”, starting with a letter or digit."
            ),
            code=CODE_CHANNEL_NAME,
            field="name",
        )
    return name


def _refused(exc: ValidationError, field: str) -> ChannelRefused:
    return ChannelRefused(" ".join(exc.messages), code=exc.error_list[0].code or "invalid", field=field)


def save_channel(
    *,
    name: str,
    url: str | None,
    kinds=(),
    description: str = "",
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
) -> AlertChannel:
    """Create the channel or change it. `url` is checked as every channel URL
    is (jobs.channels.validate: Apprise, the scheme, the fence without a host
    lookup) and stored encrypted; None, "" or the stored URL's mask keeps the
    stored URL (required for a new channel)."""
    _check_may_change(user)
    name = check_name(name)
    try:
        kinds = parse_alert_kinds(list(kinds or []))
    except ValidationError as exc:
        raise _refused(exc, "kinds") from None
    description = description or ""
    if problem := text.find_unstorable(description):
        raise ChannelRefused(
            _("Contains {problem}, which cannot be stored.").format(problem=problem),
            code=text.CODE,
            field="description",
        )
    description = description[: AlertChannel._meta.get_field("description").max_length]
    now = timezone.now()
    for _attempt in range(2):
        try:
            with transaction.atomic():
                channel = AlertChannel.objects.select_for_update().filter(name=name).first()
                stored = channels.reveal(channel.url) if channel is not None else None
                if url in (None, "") or (stored is not None and url.strip() == channels.mask(stored)):
                    if channel is None:
                        raise ChannelRefused(
                            _("Enter the channel's URL."), code="invalid_channel", field="url"
                        )
                    # A URL written to the table by hand is encrypted now.
                    token = (
                        channel.url if channels.decrypt(channel.url) is not None else channels.encrypt(stored)
                    )
                    new_url = stored
                else:
                    if problem := text.find_unstorable(url):
                        raise ChannelRefused(
                            _("Contains {problem}, which cannot be stored.").format(problem=problem),
                            code=text.CODE,
                            field="url",
                        )
                    try:
                        new_url = channels.validate(url)
                    except ValidationError as exc:
                        raise _refused(exc, "url") from None
                    token = channels.encrypt(new_url)
                masked = channels.mask(new_url) if new_url is not None else channels.MASK
                if channel is None:
                    channel = AlertChannel.objects.create(
                        name=name,
                        url=token,
                        kinds=kinds,
                        description=description,
                        created_at=now,
                        updated_at=now,
                    )
                    changes = {"url": [None, masked], "kinds": [None, kinds]}
                else:
                    old_masked = channels.mask(stored) if stored is not None else channels.MASK
                    changes = {}
                    if new_url != stored:
                        changes["url"] = [old_masked, masked]
                    if channel.kinds != kinds:
                        changes["kinds"] = [channel.kinds, kinds]
                    channel.url, channel.kinds, channel.description, channel.updated_at = (
                        token,
                        kinds,
                        description,
                        now,
                    )
                    channel.save(update_fields=["url", "kinds", "description", "updated_at"])
                audit.record(
                    action="channel-save",
                    subject=AuditEvent.Subject.CHANNELS,
                    subject_name=name,
                    user=user,
                    via=via,
                    changes={"channel": [None, name], **changes},
                )
        except IntegrityError:
            continue  # created by another request meanwhile: change it
        return channel
    raise ServiceError(_("The channel “{name}” was being changed; try again.").format(name=name))


def users_of(name: str) -> list[str]:
    """Who names the channel: the live jobs (by name) and the global setting."""
    found = [
        job_name
        for job_name, names in Job.objects.live()
        .exclude(alert_channels=[])
        .values_list("name", "alert_channels")
        if isinstance(names, list) and name in names
    ]
    found.sort()
    default = get_stored("sys.job.alertChannels")
    if isinstance(default, list) and name in default:
        found.insert(0, _("the global channels"))
    return found


def delete_channel(*, name: str, user=None, via: str = AuditEvent.Via.CONSOLE) -> bool:
    """Delete a channel nothing names (47035 otherwise); False if there was none."""
    _check_may_change(user)
    with transaction.atomic():
        users = users_of(name)
        if users:
            raise ChannelRefused(
                _("The channel “{name}” is used by {users}: choose other channels for them first.").format(
                    name=name, users=text.first_names(users)
                ),
                code=CODE_CHANNEL_IN_USE,
                field="name",
            )
        deleted, _rows = AlertChannel.objects.filter(name=name).delete()
        if deleted:
            audit.record(
                action="channel-delete",
                subject=AuditEvent.Subject.CHANNELS,
                subject_name=name,
                user=user,
                via=via,
                changes={"channel": [name, None]},
            )
    return bool(deleted)


def channel_to_dict(channel: AlertChannel) -> dict:
    """A channel as the console and the API show it: the URL masked, always."""
    url = channels.reveal(channel.url)
    return {
        "name": channel.name,
        "url": channels.mask(url) if url is not None else channels.MASK,
        "kinds": list(channel.kinds or []),
        "description": channel.description,
        "readable": url is not None,
    }


def channel_rows() -> list[dict]:
    """Every channel, masked, with how many live jobs name it and whether it
    is one of the global channels."""
    counts: dict[str, int] = {}
    for names in Job.objects.live().exclude(alert_channels=[]).values_list("alert_channels", flat=True):
        for name in names if isinstance(names, list) else []:
            counts[name] = counts.get(name, 0) + 1
    default = get_stored("sys.job.alertChannels")
    default = default if isinstance(default, list) else []
    return [
        {**channel_to_dict(channel), "jobs": counts.get(channel.name, 0), "default": channel.name in default}
        for channel in AlertChannel.objects.all()
    ]
