"""The API's named alert channels: anyone signed in reads their names (a
job's `alert_channels` names them), administrators their masked URLs and
change them."""

from django.http import HttpResponse, JsonResponse
from ninja import Path, Router

from jobs import access, channelbook
from jobs.api.framework import VIA, ApiError
from jobs.api.schemas import channels as schemas
from jobs.api.schemas.base import CHANGE_ERRORS, EDIT_ERRORS, ERRORS
from jobs.models import CHANNEL_NAME_PATTERN

router = Router()
NAME = Path(..., description="The channel's name.", pattern=f"^{CHANNEL_NAME_PATTERN}$")


def _rows(request) -> list[dict]:
    admin = access.can_administer(request.user)
    return [{**row, "url": row["url"] if admin else None} for row in channelbook.channel_rows()]


@router.get(
    "/channels",
    operation_id="listChannels",
    url_name="channels",
    summary="Named alert channels (URLs masked, for administrators only).",
    response={200: schemas.ChannelList, **ERRORS},
)
def list_channels(request):
    return JsonResponse({"results": _rows(request)})


@router.put(
    "/channels/{name}",
    operation_id="setChannel",
    url_name="channel",
    summary="Create a named channel or change it (admin).",
    description="400 codes: 47028 a name that is not one, invalid_channel / unfenced_channel / "
    "fenced_channel a URL Cronboard does not send to.",
    response={200: schemas.Channel, **EDIT_ERRORS},
)
def set_channel(request, payload: schemas.ChannelInput, name: str = NAME):
    try:
        channelbook.save_channel(
            name=name,
            url=payload.url,
            kinds=payload.kinds or [],
            description=payload.description or "",
            user=request.user,
            via=VIA,
        )
    except channelbook.ChannelRefused as exc:
        raise ApiError(400, exc.code, str(exc), exc.field) from None
    return JsonResponse(next(row for row in _rows(request) if row["name"] == name))


@router.delete(
    "/channels/{name}",
    operation_id="deleteChannel",
    summary="Delete a channel nothing names (admin; 409 47035 while a job or the global setting does).",
    response={204: None, **CHANGE_ERRORS},
)
def delete_channel(request, name: str = NAME):
    try:
        deleted = channelbook.delete_channel(name=name, user=request.user, via=VIA)
    except channelbook.ChannelRefused as exc:
        raise ApiError(409, exc.code, str(exc), exc.field) from None
    if not deleted:
        raise ApiError(404, "not_found", "No such channel.")
    return HttpResponse(status=204)
