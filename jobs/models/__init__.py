"""Cronboard's data model, by subject: jobs (`jobs`), the workflow graph's
edges (`dependencies`), runs (`runs`), the alert outbox and messages
(`alerts`), the system's own rows (`system`) and the runs' rollup
(`trends`). The database is the only source of truth:
every intent is written to a row before anything runs, every outcome is
written back to that row. Import from here: `from jobs.models import Job`."""

from jobs.models.alerts import CHANNEL_NAME_PATTERN, Alert, AlertChannel, AlertDelivery, Message
from jobs.models.base import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_PARALLEL,
    MAX_SHARDS,
    MAX_TIMEOUT_SECONDS,
    MIN_INTERVAL_SECONDS,
    ChoiceLabels,
)
from jobs.models.calendars import WorkCalendar, find_calendar
from jobs.models.dependencies import JobDependency
from jobs.models.jobs import NAMESPACE_RE, NEEDS_ATTENTION, Job, JobQuerySet, job_name
from jobs.models.pools import (
    MAX_BACKFILL_FIRES,
    MAX_BACKFILL_PARALLEL,
    MAX_POOL_SIZE,
    POOL_NAME_PATTERN,
    Backfill,
    Pool,
)
from jobs.models.roles import ROLE_ORDER, GrantSource, Role, RoleGrant
from jobs.models.runs import (
    CURSOR_PATTERN,
    LIVE_RUN,
    MANUAL_RUN,
    QUEUED_RUN,
    WAITING_RUN,
    Run,
    RunQuerySet,
    cap_message,
    parse_run_cursor,
    run_cursor,
)
from jobs.models.secrets import Secret
from jobs.models.system import APIToken, AuditEvent, LeadershipChange, Lease, Profile, Setting
from jobs.models.trends import BOUNDS_MS, COUNTED, JobRollup, JobWindowTotal, NamespaceRollup, RollupMark

__all__ = [
    "BOUNDS_MS",
    "CHANNEL_NAME_PATTERN",
    "COUNTED",
    "CURSOR_PATTERN",
    "DEFAULT_ALERT_THRESHOLD",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_RETRY_INTERVAL_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "LIVE_RUN",
    "MANUAL_RUN",
    "MAX_BACKFILL_FIRES",
    "MAX_BACKFILL_PARALLEL",
    "MAX_PARALLEL",
    "MAX_POOL_SIZE",
    "MAX_SHARDS",
    "MAX_TIMEOUT_SECONDS",
    "MIN_INTERVAL_SECONDS",
    "NAMESPACE_RE",
    "NEEDS_ATTENTION",
    "POOL_NAME_PATTERN",
    "QUEUED_RUN",
    "ROLE_ORDER",
    "WAITING_RUN",
    "APIToken",
    "Alert",
    "AlertChannel",
    "AlertDelivery",
    "AuditEvent",
    "Backfill",
    "ChoiceLabels",
    "GrantSource",
    "Job",
    "JobDependency",
    "JobQuerySet",
    "JobRollup",
    "JobWindowTotal",
    "LeadershipChange",
    "Lease",
    "Message",
    "NamespaceRollup",
    "Pool",
    "Profile",
    "Role",
    "RoleGrant",
    "RollupMark",
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
