"""The audit trail: one row per change a person or program makes to a job,
to the settings, the global alert channels, roles or secrets, and one per
sign-in (or failed attempt). Never holds a secret: jobs and the settings name
alert channels (jobs.channelbook records a channel's URL masked), and a
sign-in row holds the name typed, never the password."""

from jobs.core import logcontext
from jobs.models import AuditEvent, Job
from jobs.text import storable

AUDITED_FIELDS = Job.EDITABLE_FIELDS

# The config centre's key whose changes are the global alert channels'.
CHANNELS_SETTING = "sys.job.alertChannels"

# Authentication backends that check a password Cronboard stores: a sign-in
# through any other (remote user, OIDC, SAML, …) is recorded as via SSO.
LOCAL_BACKENDS = frozenset(
    {
        "django.contrib.auth.backends.ModelBackend",
        "django.contrib.auth.backends.AllowAllUsersModelBackend",
    }
)


def snapshot(job: Job) -> dict:
    """The audited fields (channels by name: the trail never holds a secret)."""
    return {name: getattr(job, name) for name in AUDITED_FIELDS}


def diff(before: dict | None, after: dict) -> dict:
    """{field: [old, new]} for what changed; everything (old = None) for a create."""
    before = before or {}
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}


def record(
    *,
    job: Job | None = None,
    action: str,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    changes: dict | None = None,
    subject: str = AuditEvent.Subject.JOB,
    subject_name: str = "",
    username: str = "",
) -> AuditEvent:
    """One row. `job` for a change to a job; else `subject` says what
    changed, and `subject_name` which one (a secret, a role's holder).
    `username`: the name typed when there is no such user (a failed
    sign-in)."""
    real_user = user if getattr(user, "pk", None) else None
    name_field = AuditEvent._meta.get_field("username").max_length
    return AuditEvent.objects.create(
        job=job,
        job_name=job.name if job is not None else "",
        subject=AuditEvent.Subject.JOB if job is not None else subject,
        subject_name="" if job is not None else subject_name[:200],
        user=real_user,
        username=(real_user.get_username() if real_user else username)[:name_field],
        action=action,
        via=via,
        changes=changes or {},
        request_id=logcontext.request_id(),
    )


def record_settings(*, changes: dict, user=None, via: str = AuditEvent.Via.CONSOLE) -> None:
    """Rows for a save of the config centre: `changes` is {key: [old, new]}
    of the keys whose values changed. The global alert channels get a row of
    their own; the other keys share one."""
    changes = dict(changes)
    if CHANNELS_SETTING in changes:
        old, new = changes.pop(CHANNELS_SETTING)
        record(
            action="change",
            subject=AuditEvent.Subject.CHANNELS,
            user=user,
            via=via,
            changes={CHANNELS_SETTING: [old or [], new or []]},
        )
    if changes:
        record(action="change", subject=AuditEvent.Subject.SETTINGS, user=user, via=via, changes=changes)


def record_sign_in(sender, request, user, **kwargs) -> None:
    """Django's user_logged_in: a row per sign-in, via SSO when a backend
    other than Cronboard's own passwords let the user in. A sign-in whose
    groups were mapped to roles has its row already (jobs.rolemapping)."""
    if getattr(user, "cronboard_mapping", None) is not None:
        return
    backend = getattr(user, "backend", None) or ""
    via = AuditEvent.Via.CONSOLE if not backend or backend in LOCAL_BACKENDS else AuditEvent.Via.SSO
    record(action="sign-in", subject=AuditEvent.Subject.SIGN_IN, user=user, via=via)


def record_failed_sign_in(sender, credentials, request=None, **kwargs) -> None:
    """Django's user_login_failed: a row with the name typed. `credentials`
    come with the password already replaced by Django; only the user name
    is read from them. From the attempt that locks a client out
    (LOGIN_FAILURE_LIMIT) on, django-axes' own log holds them (the admin's
    Access attempts) and no row is written here, so a client guessing
    passwords cannot grow the audit table however long it goes on."""
    if request is not None and getattr(request, "axes_locked_out", False):
        return
    typed = credentials.get("username") if isinstance(credentials, dict) else None
    record(
        action="sign-in-failed",
        subject=AuditEvent.Subject.SIGN_IN,
        username=storable(typed) if isinstance(typed, str) else "",
    )
