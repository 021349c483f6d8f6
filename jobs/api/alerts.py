"""The API's operation on one alert: acknowledge it (an operator of its
job's namespace)."""

from django.http import JsonResponse
from ninja import Router

from jobs import access
from jobs.acknowledge import acknowledge_alert
from jobs.api.framework import VIA
from jobs.api.schemas.alerts import Alert
from jobs.api.schemas.base import CHANGE_ERRORS
from jobs.serializers import alert_to_dict

router = Router()


@router.post(
    "/alerts/{int:alert_id}/acknowledge",
    operation_id="acknowledgeAlert",
    url_name="alert_acknowledge",
    summary="Acknowledge an alert (operator): someone is on it.",
    description="Acknowledging it again changes nothing: the first acknowledgement's who and when stay.",
    response={200: Alert, **CHANGE_ERRORS},
)
def acknowledge(request, alert_id: int):
    alert = access.get_alert_for_user(request.user, alert_id)
    acknowledge_alert(alert=alert, user=request.user, via=VIA)
    return JsonResponse(alert_to_dict(alert))
