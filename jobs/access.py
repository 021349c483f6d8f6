"""Who may see and change what, by role (jobs.models.Role: viewer,
operator, editor, admin) granted everywhere or per namespace; superusers
may do everything. Views, the API, JobScope and commands decide access only
through these helpers."""

from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404
from django.shortcuts import resolve_url
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from django_htmx.http import HttpResponseClientRedirect

from jobs.models import ROLE_ORDER, Alert, Job, Message, Role, RoleGrant, Run

# What each role adds to the one before it (docs/operations.md, "Roles and
# namespaces"). An action is the least role that may do it.
VIEW = Role.VIEWER  # see jobs, runs, alerts
OPERATE = Role.OPERATOR  # run (with overrides), pause, resume, re-enable, cancel, retry, acknowledge
EDIT = Role.EDITOR  # create, edit, clone, import, delete jobs; use secrets in them
ADMIN = Role.ADMIN  # settings, channels, secrets, roles, the audit page: only when granted everywhere

_RANK = {role: rank for rank, role in enumerate(ROLE_ORDER)}
_NONE = -1
ANYWHERE = object()  # can(..., namespace=ANYWHERE): in at least one namespace

_REFUSALS = {
    VIEW: gettext_noop("You may not see this."),
    OPERATE: gettext_noop("Your role may not run, pause or cancel jobs here."),
    EDIT: gettext_noop("Your role may not change jobs here."),
    ADMIN: gettext_noop("Only an administrator may do this."),
}


def _signed_in(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def _ranks(user) -> dict:
    """{namespace or None (everywhere): highest rank granted} for `user`:
    their own grants and their groups', narrowed by the token they came
    with (narrow). Read once per request object."""
    cached = getattr(user, "_cronboard_ranks", None)
    if cached is not None:
        return cached
    ranks: dict = {}
    if user.is_superuser:
        ranks[None] = _RANK[ADMIN]
    else:
        grants = RoleGrant.objects.filter(Q(user=user) | Q(group__user=user)).values_list("namespace", "role")
        for namespace, role in grants:
            ranks[namespace] = max(ranks.get(namespace, _NONE), _RANK[role])
    narrowing = getattr(user, "_cronboard_narrowing", None)
    if narrowing is not None:
        ranks = _narrowed(ranks, *narrowing)
    user._cronboard_ranks = ranks
    return ranks


def _narrowed(ranks: dict, namespace: str | None, read_only: bool) -> dict:
    """What a narrowed token may do: never more than its user may now."""
    if namespace is not None:
        rank = max(ranks.get(None, _NONE), ranks.get(namespace, _NONE))
        ranks = {namespace: rank} if rank > _NONE else {}
    if read_only:
        ranks = {ns: min(rank, _RANK[VIEW]) for ns, rank in ranks.items()}
    return ranks


def narrow(user, *, namespace: str | None, read_only: bool) -> None:
    """Limit what `user` may do in this request to one namespace and/or to
    viewing (an API token's narrowing)."""
    user._cronboard_narrowing = (namespace, read_only)
    user.__dict__.pop("_cronboard_ranks", None)


def rank_in(user, namespace) -> int:
    """The rank of the highest role `user` holds in `namespace` (None: the
    role granted everywhere; ANYWHERE: the highest in any namespace)."""
    if not _signed_in(user):
        return _NONE
    ranks = _ranks(user)
    if namespace is ANYWHERE:
        return max(ranks.values(), default=_NONE)
    if namespace is None:
        return ranks.get(None, _NONE)
    return max(ranks.get(None, _NONE), ranks.get(namespace, _NONE))


def can(user, action: Role, *, job: Job | None = None, namespace=ANYWHERE) -> bool:
    """May `user` do `action` on `job`, in `namespace`, or (neither given)
    somewhere? The administrator's actions concern no namespace: they need
    the admin role granted everywhere."""
    if action == ADMIN:
        namespace = None
    elif job is not None:
        namespace = job.namespace
    return rank_in(user, namespace) >= _RANK[action]


def require(user, action: Role, *, job: Job | None = None, namespace=ANYWHERE) -> None:
    """PermissionDenied (the console's refusal, the API's `forbidden`) unless can()."""
    if not can(user, action, job=job, namespace=namespace):
        raise PermissionDenied(_(_REFUSALS[action]))


def namespaces_for(user, action: Role = VIEW) -> set[str] | None:
    """The namespaces where `user` may do `action`: None for all of them."""
    if rank_in(user, None) >= _RANK[action]:
        return None
    if not _signed_in(user):
        return set()
    return {ns for ns, rank in _ranks(user).items() if ns is not None and rank >= _RANK[action]}


def can_view(user) -> bool:
    """Signed in: may open the console (which shows only what is granted)."""
    return _signed_in(user)


def forget_roles(user) -> None:
    """Read `user`'s grants again at the next question: they changed."""
    user.__dict__.pop("_cronboard_ranks", None)


def roles_held(user) -> dict:
    """{namespace or None (everywhere): the highest role `user` holds there},
    their own grants and their groups' (a superuser: admin everywhere)."""
    if not _signed_in(user):
        return {}
    return {namespace: ROLE_ORDER[rank] for namespace, rank in _ranks(user).items()}


def has_role(user) -> bool:
    """Holds a role somewhere (or is a superuser): without one, a user signed
    in through a directory gets no session and their API tokens are refused."""
    return rank_in(user, ANYWHERE) >= _RANK[VIEW]


def can_edit(user, job: Job | None = None) -> bool:
    """May change `job` (or some job, without one): editor there."""
    return can(user, EDIT, job=job)


def sees_credentials(user, job: Job | None = None) -> bool:
    """Credentials typed in clear are shown to those who may edit the job;
    a list of jobs from several namespaces, to editors everywhere."""
    return can(user, EDIT, job=job, namespace=ANYWHERE if job is not None else None)


def can_operate(user, job: Job | None = None) -> bool:
    return can(user, OPERATE, job=job)


def can_administer(user) -> bool:
    """Settings, channels, secrets, roles: admin everywhere."""
    return can(user, ADMIN)


def can_see_audit(user) -> bool:
    """The audit page across all jobs, settings and sign-ins: admins."""
    return can_administer(user)


def jobs_in_namespace(namespace: str | None):
    """Live jobs, limited to one namespace unless `namespace` is None. For
    trusted callers (JobScope, commands); people go through visible_jobs."""
    jobs = Job.objects.live()
    if namespace is not None:
        jobs = jobs.filter(namespace=namespace)
    return jobs


def visible_jobs(user, *, namespace: str | None = None):
    """The live jobs `user` may see (those in the namespaces granted),
    optionally only those in `namespace` ("" is the jobs outside any namespace)."""
    if not can_view(user):
        return Job.objects.none()
    jobs = jobs_in_namespace(namespace)
    allowed = namespaces_for(user, VIEW)
    if allowed is not None:
        jobs = jobs.filter(namespace__in=allowed)
    return jobs


def get_job_for_user(user, job_id, *, namespace: str | None = None) -> Job:
    """The live job with this id, if `user` may see it (and it is in
    `namespace`, when given); else 404."""
    try:
        return visible_jobs(user, namespace=namespace).get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job.") from None


def visible_runs(user):
    """Runs of the jobs `user` may see, and one-off tasks (which belong to no
    job, so to no namespace: seen by those granted a role everywhere)."""
    if not can_view(user):
        return Run.objects.none()
    allowed = namespaces_for(user, VIEW)
    if allowed is None:
        return Run.objects.filter(Q(job__isnull=True) | Q(job__deleted_at__isnull=True))
    return Run.objects.filter(job__deleted_at__isnull=True, job__namespace__in=allowed)


def visible_by_namespace(user, rows):
    """`rows` (a query over a model with a `namespace` column: the trends'
    rollups) limited to the namespaces `user` may see."""
    if not can_view(user):
        return rows.none()
    allowed = namespaces_for(user, VIEW)
    return rows if allowed is None else rows.filter(namespace__in=allowed)


def visible_alerts(user):
    """Alerts about the jobs `user` may see."""
    if not can_view(user):
        return Alert.objects.none()
    allowed = namespaces_for(user, VIEW)
    if allowed is None:
        return Alert.objects.all()
    return Alert.objects.filter(job__namespace__in=allowed)


def get_alert_for_user(user, alert_id) -> Alert:
    """The alert with this id, if `user` may see its job; else 404."""
    try:
        return visible_alerts(user).select_related("job").get(pk=int(alert_id))
    except (Alert.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such alert.") from None


def visible_messages(user):
    """`user`'s in-site messages about jobs they may still see (and those
    whose job is gone): one about a namespace no longer granted is hidden,
    and not counted unread."""
    if not can_view(user):
        return Message.objects.none()
    mine = Message.objects.filter(user=user)
    allowed = namespaces_for(user, VIEW)
    if allowed is None:
        return mine
    return mine.filter(Q(job__isnull=True) | Q(job__namespace__in=allowed))


def users_who_may(action: Role, *, namespace: str):
    """The active users who may do `action` in `namespace`, as can() decides
    it for each: superusers, and holders of that role or a higher one there
    or everywhere, by their own grants or their groups'. Who an alert's
    in-site messages may reach."""
    User = get_user_model()
    roles = [role for role in ROLE_ORDER if _RANK[role] >= _RANK[action]]
    grants = RoleGrant.objects.filter(Q(namespace__isnull=True) | Q(namespace=namespace), role__in=roles)
    members = User.groups.through.objects.filter(group__in=grants.filter(group__isnull=False).values("group"))
    return User.objects.filter(
        Q(is_superuser=True)
        | Q(pk__in=grants.filter(user__isnull=False).values("user"))
        | Q(pk__in=members.values("user")),
        is_active=True,
    )


def can_act_on_run(user, run: Run, action: Role = OPERATE) -> bool:
    """A run is acted on with its job's namespace; a task's, everywhere."""
    if run.job_id is None:
        return can(user, action, namespace=None)
    return can(user, action, job=run.job)


def get_run_for_user(user, run_id) -> Run:
    try:
        return visible_runs(user).select_related("job").get(pk=int(run_id))
    except (Run.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such run.") from None


def login_required(view):
    """Django's login_required, except that an htmx request (a fragment whose
    session expired) is told to load the login page as a whole page instead
    of having the login form swapped into the fragment."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if can_view(request.user):
            return view(request, *args, **kwargs)
        if request.htmx:
            back = request.htmx.current_url_abs_path or request.get_full_path()
            login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': back})}"
            return HttpResponseClientRedirect(login_url)
        return redirect_to_login(request.get_full_path())

    return wrapper
