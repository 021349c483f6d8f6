"""Cronboard's data model, by subject: jobs (`jobs`), the workflow graph's
edges (`dependencies`), runs (`runs`), the alert outbox and messages
(`alerts`), and the system's own rows (`system`). The database is the only source of truth:
every intent is written to a row before anything runs, every outcome is
written back to that row. Import from here: `from jobs.models import Job`."""

from jobs.models.alerts import Alert, AlertDelivery, Message
from jobs.models.base import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    MIN_INTERVAL_SECONDS,
    ChoiceLabels,
)
from jobs.models.calendars import WorkCalendar, find_calendar
from jobs.models.dependencies import JobDependency
from jobs.models.jobs import NEEDS_ATTENTION, Job, JobQuerySet, job_name
from jobs.models.roles import ROLE_ORDER, Role, RoleGrant
from jobs.models.runs import (
    CURSOR_PATTERN,
    LIVE_RUN,
    MANUAL_RUN,
    QUEUED_RUN,
    Run,
    RunQuerySet,
    cap_message,
    parse_run_cursor,
    run_cursor,
)
from jobs.models.secrets import Secret
from jobs.models.system import APIToken, AuditEvent, LeadershipChange, Lease, Profile, Setting

__all__ = [
    "CURSOR_PATTERN",
    "DEFAULT_ALERT_THRESHOLD",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_RETRY_INTERVAL_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "LIVE_RUN",
    "MANUAL_RUN",
    "MAX_TIMEOUT_SECONDS",
    "MIN_INTERVAL_SECONDS",
    "NEEDS_ATTENTION",
    "QUEUED_RUN",
    "ROLE_ORDER",
    "APIToken",
    "Alert",
    "AlertDelivery",
    "AuditEvent",
    "ChoiceLabels",
    "Job",
    "JobDependency",
    "JobQuerySet",
    "LeadershipChange",
    "Lease",
    "Message",
    "Profile",
    "Role",
    "RoleGrant",
    "Run",
    "RunQuerySet",
    "Secret",
    "Setting",
    "WorkCalendar",
    "cap_message",
    "find_calendar",
    "job_name",
    "parse_run_cursor",
    "run_cursor",
]
