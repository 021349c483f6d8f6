"""The API's shape of an alert, as acknowledging one answers it."""

from ninja import Field, Schema

from jobs import models
from jobs.api.schemas.base import choice


class Alert(Schema):
    id: int
    job_id: int
    kind: choice(models.Alert.Kind.values)
    status: choice(models.Alert.Status.values)
    subject: str
    created_at: str = Field(..., json_schema_extra={"format": "date-time"})
    acknowledged_at: str | None = Field(
        ..., json_schema_extra={"format": "date-time"}, description="null until an operator acknowledges it."
    )
    acknowledged_by: str = Field(..., description="The user name of who acknowledged it; empty until then.")
