"""Named alert channels as jobs and the global setting name them: which
names are channels (`clean_names`, for every door that sets a job's or the
setting's channels), and which URLs an alert of one kind goes to
(`urls_for`). Creating, changing and deleting the channels themselves is
jobs.channelbook's."""

import re

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from jobs import channels
from jobs.models import CHANNEL_NAME_PATTERN, AlertChannel

# The errors' codes (docs/api.md): a name that is not one, a name no channel
# has, a channel still named by a job or the global setting.
CODE_CHANNEL_NAME = "47028"
CODE_UNKNOWN_CHANNEL = "47029"
CODE_CHANNEL_IN_USE = "47035"

NAME_RE = re.compile(rf"{CHANNEL_NAME_PATTERN}\Z")


def _items(value) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [item.strip() for item in re.split(r"[\s,]+", value) if item.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise ValidationError(_("Give channels as a list of channel names."), code=CODE_UNKNOWN_CHANNEL)


def _by_url() -> dict[str, str]:
    """{URL: name} and {masked URL: name} of every channel (the first name
    when two hold the same URL)."""
    found: dict[str, str] = {}
    for name, token in AlertChannel.objects.order_by("name").values_list("name", "url"):
        url = channels.reveal(token)
        if url is not None:
            found.setdefault(url, name)
            found.setdefault(channels.mask(url), name)
    return found


def clean_names(value) -> list[str]:
    """Channel names (a list, or text separated by commas or white space) →
    the names, each once, in the order given. A URL, as files written before
    channels had names hold, stands for the channel with that URL (or, masked,
    with that mask); ValidationError (47029) naming an unknown name, or a URL
    no channel has, with what to do."""
    items = _items(value)
    if len(items) > channels.MAX_CHANNELS:
        raise ValidationError(
            _("A job can have at most {max_channels} channels.").format(max_channels=channels.MAX_CHANNELS),
            code="too_many",
        )
    known = set(AlertChannel.objects.filter(name__in=items).values_list("name", flat=True))
    by_url = _by_url() if any("://" in item for item in items) else {}
    names: list[str] = []
    for item in items:
        if item in known:
            name = item
        elif "://" in item:
            name = by_url.get(item)
            if name is None:
                shown = item if channels.MASK in item else channels.mask(item)
                raise ValidationError(
                    _(
                        "“{url}” is a URL, and no named channel has it: an administrator creates the channel "
                        "(Alerts → Channels), then the job names it."
                    ).format(url=shown),
                    code=CODE_UNKNOWN_CHANNEL,
                )
        else:
            raise ValidationError(
                _("“{name}” is not an alert channel (see Alerts → Channels).").format(name=item[:100]),
                code=CODE_UNKNOWN_CHANNEL,
            )
        if name not in names:
            names.append(name)
    return names


def urls_for(names, *, kind: str | None = None) -> list[tuple[str, str]]:
    """(name, URL) of the named channels that receive `kind` (None: any), in
    the order named, one per distinct URL. A name no channel has any more, or
    a URL this SECRET_KEY cannot read, is left out (and logged)."""
    wanted = [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
    rows = {row.name: row for row in AlertChannel.objects.filter(name__in=wanted)}
    found: list[tuple[str, str]] = []
    for name in wanted:
        row = rows.get(name)
        if row is None:
            channels.log.error("alert channel %r is named but does not exist; skipped", name)
            continue
        if kind is not None and row.kinds and kind not in row.kinds:
            continue
        url = channels.reveal(row.url)
        if url is None:
            channels.log.error(
                "alert channel %r could not be decrypted (was SECRET_KEY changed?); skipped", name
            )
            continue
        if url not in (seen for _name, seen in found):
            found.append((name, url))
    return found


def choices() -> list[tuple[str, str]]:
    """(name, label) of every channel, for the job form's boxes."""
    return [
        (name, f"{name} — {description}" if description else name)
        for name, description in AlertChannel.objects.values_list("name", "description")
    ]
