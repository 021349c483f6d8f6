"""Workflows: which jobs run after which, and the rules that keep a chain of
runs finite.

A job's `after` names its upstream jobs. `refusal` says why a job may not
have the upstreams it asks for: one that is not a live job (47007), a loop
(47008), a chain deeper than JOBS_MAX_CHAIN_DEPTH after its first job
(47009), more than JOBS_MAX_DOWNSTREAM jobs after one job (47010). Every
save asks twice: JobForm, for the answer a person reads at every door (the
console, the API, `jobs import`, scopes), and services.save_job inside the
saving transaction once `lock_graph` holds the graph, so that of two saves
racing to close a loop the second sees the first and is refused.

The engine does not rely on the stored graph: a downstream run that would
repeat a job of the chain of runs that led to it, or go deeper than
JOBS_MAX_CHAIN_DEPTH, is recorded skipped instead (jobs.engine.outcomes).
"""

import collections
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils.translation import gettext as _

from jobs import access, jsontext
from jobs.models import Job, JobDependency, job_name

# The spec's codes for a refused `after` (docs/handlers.md lists them).
CODE_UNKNOWN_UPSTREAM = "47007"
CODE_CYCLE = "47008"
CODE_CHAIN_TOO_DEEP = "47009"
CODE_TOO_MANY_DOWNSTREAM = "47010"
CODE_UPSTREAM_NOT_EDITABLE = "47011"
CODE_RENAME_REFERENCED = "47012"

# The PostgreSQL advisory lock that serialises writers of the graph: a fixed
# key, the same in every process (the bytes of "cb-graph" as a positive bigint).
GRAPH_LOCK_KEY = int.from_bytes(b"cb-graph", "big") >> 1
# How long a save waits for the graph lock (and, after it, for the rows it
# locks) on PostgreSQL before it gives up, answered as busy
# (refusals.SaveBusy): a long `jobs import` holds the lock for its whole
# transaction, and an SQL job could hold it on purpose. SQLite's writers
# wait for its write lock as long as its busy timeout (config/settings.py).
GRAPH_LOCK_TIMEOUT = "10s"


MAX_UPSTREAMS = 50


def coerce_after(value) -> list[dict]:
    """A job's upstreams, [{"job": NAME, "on": "success"|"failure"|"finish"}],
    from a list or its JSON text; "on" defaults to success; names as stored
    (jobs.models.job_name: two spellings of one name are one name). Unknown
    names and cycles are `refusal`'s business (they need the other jobs)."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = jsontext.loads(value)
        except jsontext.JsonTextError as exc:
            raise ValidationError(
                _("“After” must be a JSON list: {message}").format(message=exc.message), code="invalid"
            ) from None
    if not isinstance(value, list):
        raise ValidationError(_("“After” must be a list of {job, on} objects."), code="invalid")
    if len(value) > MAX_UPSTREAMS:
        raise ValidationError(
            _("A job can follow at most {max_upstreams} upstream jobs.").format(max_upstreams=MAX_UPSTREAMS),
            code="invalid",
        )
    clean, seen = [], set()
    for item in value:
        if isinstance(item, str):
            item = {"job": item}
        if not isinstance(item, dict) or set(item) - {"job", "on"}:
            raise ValidationError(_("Each upstream is an object with “job” and “on”."), code="invalid")
        name, on = item.get("job"), item.get("on", JobDependency.On.SUCCESS)
        if not isinstance(name, str) or not name.strip() or len(name) > 200 or "\x00" in name:
            raise ValidationError(_("Each upstream needs the name of a job in “job”."), code="invalid")
        if on not in JobDependency.On.values:
            raise ValidationError(
                _("“on” must be one of {join}, not “{value}”.").format(
                    join=", ".join(JobDependency.On.values), value=str(on)[:50]
                ),
                code="invalid",
            )
        name = job_name(name)
        if name in seen:
            raise ValidationError(
                _("“{name}” is named twice in “after”.").format(name=name[:100]), code="invalid"
            )
        seen.add(name)
        clean.append({"job": name, "on": on})
    return clean


def lock_graph() -> None:
    """Hold the workflow graph for the rest of the current transaction, so
    the check that follows reads every save committed before it and no
    other save can commit in between. PostgreSQL: a transaction-level
    advisory lock (released at commit or rollback; several in one
    transaction are fine). SQLite: nothing to do here, every transaction
    begins IMMEDIATE (config/settings.py), which takes the database's one
    write lock before its first statement, so writers already run one after
    another and each reads what those before it committed. A wait longer
    than GRAPH_LOCK_TIMEOUT fails the statement (SQLSTATE 55P03); the
    timeout stays set for the rest of the transaction (SET LOCAL), so no
    lock the save takes after this one waits longer."""
    if not connection.in_atomic_block:
        raise RuntimeError("lock_graph() holds the lock until the transaction ends: call it inside one")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [GRAPH_LOCK_TIMEOUT])
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [GRAPH_LOCK_KEY])


def names_graph() -> dict[str, set[str]]:
    """Live job name → the names of the live jobs it runs after."""
    graph: dict[str, set[str]] = {}
    rows = JobDependency.objects.filter(
        downstream__deleted_at__isnull=True, upstream__deleted_at__isnull=True
    ).values_list("downstream__name", "upstream__name")
    for downstream, upstream in rows:
        graph.setdefault(downstream, set()).add(upstream)
    return graph


def find_cycle(graph, start: str) -> list[str] | None:
    """A path start → … → start following upstream edges, or None. Each
    node is visited once, and remembers where it was reached from."""
    stack = [start]
    came_from: dict[str, str] = {}
    while stack:
        node = stack.pop()
        for upstream in sorted(graph.get(node, ())):
            if upstream == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if upstream not in came_from:
                came_from[upstream] = node
                stack.append(upstream)
    return None


def on_cycles(graph) -> set[str]:
    """The nodes that lie on a cycle, in one pass over the graph (Tarjan's
    strongly connected components, without recursion): a node is on a cycle
    when its component has another node, or it follows itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: set[str] = set()
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, upstreams = work[-1]
            for upstream in upstreams:
                if upstream not in index:
                    index[upstream] = low[upstream] = len(index)
                    stack.append(upstream)
                    on_stack.add(upstream)
                    work.append((upstream, iter(sorted(graph.get(upstream, ())))))
                    break
                if upstream in on_stack:
                    low[node] = min(low[node], index[upstream])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.update(component)
    return found


def downstream_of(graph) -> dict[str, set[str]]:
    """The same edges the other way: upstream name → the names after it."""
    downstream: dict[str, set[str]] = {}
    for node, ups in graph.items():
        for upstream in ups:
            downstream.setdefault(upstream, set()).add(node)
    return downstream


class Workflow(collections.ChainMap):
    """The jobs of an import file ({name: [upstream names]}), saved together,
    laid over the stored graph, which is read once for the whole file; what
    every job's check needs of the whole graph (the nodes on a loop, the
    edges the other way, the longest chains) is worked out once too. A job
    of the file checked with the file's own upstreams reads these, so a file
    is validated in time proportional to its size, not to its size times the
    graph's. Only for checking before a save: the check under the lock
    (services.save_job) reads the stored graph again."""

    def __init__(self, file: dict[str, list[str]]):
        super().__init__(dict(file), names_graph())
        self.file, self.stored = self.maps
        self.cyclic = on_cycles(self)
        self.downstream = downstream_of(self)
        self.up_memo: tuple[dict, dict] = ({}, {})
        self.down_memo: tuple[dict, dict] = ({}, {})

    def as_filed(self, name: str, upstreams: list[str]) -> bool:
        return name in self.file and set(self.file[name]) == set(upstreams)

    def cycle(self, name: str, upstreams: list[str]) -> list[str] | None:
        if self.as_filed(name, upstreams):
            return find_cycle(self, name) if name in self.cyclic else None
        return find_cycle(collections.ChainMap({name: set(upstreams)}, self), name)


def longest_path(edges, start: str, memo: tuple[dict, dict] | None = None) -> list[str]:
    """The longest path from `start` following `edges`, `start` first. A loop
    that does not pass through `start` (the stored graph is read as it is,
    and rows written behind the saves' checks can hold one) is cut where it
    closes, so this always ends; no recursion, so a chain of any length is
    measured. `memo`: the (length, following) of earlier calls on the same
    edges, so that measuring every node of a graph visits each node once."""
    length, following = memo if memo is not None else ({}, {})
    on_path = {start}
    stack = [(start, iter(sorted(edges.get(start, ()))))]
    while stack:
        node, nexts = stack[-1]
        for item in nexts:
            if item not in length and item not in on_path:
                on_path.add(item)
                stack.append((item, iter(sorted(edges.get(item, ())))))
                break
        else:
            stack.pop()
            on_path.discard(node)
            done = [item for item in sorted(edges.get(node, ())) if item in length]
            best = max(done, key=lambda item: length[item], default=None)
            length[node] = 0 if best is None else length[best] + 1
            if best is not None:
                following[node] = best
    path = [start]
    while path[-1] in following:
        path.append(following[path[-1]])
    return path


def _quoted_path(names: list[str], *, most: int = 7) -> str:
    quoted = [f"“{name[:100]}”" for name in names]
    if len(quoted) > most:
        quoted = [*quoted[:3], "…", *quoted[-3:]]
    return " → ".join(quoted)


def refusal(
    *,
    name: str,
    upstreams: list[str],
    stored_name: str | None = None,
    workflow: dict[str, list[str]] | None = None,
) -> ValidationError | None:
    """Why the job `name` may not run after `upstreams` (job names, as
    stored: jobs.models.job_name), or None. `stored_name`: the job's name as
    stored when this is an edit (it may be a rename); `workflow`: {name:
    [upstream names]} of jobs saved together with it (an import file), which
    count as existing, with these edges. The depth and fan-out limits are
    asked of an upstream the job did not follow before: an edit that adds
    none cannot make a chain deeper or wider, whatever the settings say now."""
    workflow = workflow or {}
    if not upstreams:
        return None
    filed = (
        isinstance(workflow, Workflow) and stored_name in (None, name) and workflow.as_filed(name, upstreams)
    )
    live = set(Job.objects.named(*upstreams).values_list("name", flat=True)) - {stored_name, name}
    unknown = [n for n in upstreams if n not in live and n not in workflow and n != name]
    if unknown:
        return ValidationError(
            _("No job named {join} to run after.").format(
                join=", ".join(f"“{n[:100]}”" for n in unknown[:5])
            ),
            code=CODE_UNKNOWN_UPSTREAM,
        )
    if filed:
        # The whole graph as this check would build it, already built.
        graph, downstream = workflow, workflow.downstream
        before = workflow.stored.get(name, set())
        cycle = workflow.cycle(name, upstreams)
    else:
        graph = names_graph()
        before = graph.get(stored_name, set()) if stored_name else set()
        if stored_name and stored_name != name:
            graph = {
                (name if d == stored_name else d): {name if u == stored_name else u for u in ups}
                for d, ups in graph.items()
            }
        for other, ups in workflow.items():
            graph[other] = set(ups)
        graph[name] = set(upstreams)
        cycle = find_cycle(graph, name)
    if cycle:
        return ValidationError(
            _("A job cannot run after itself: {path}.").format(
                path=_quoted_path(list(reversed(cycle)), most=50)
            ),
            code=CODE_CYCLE,
        )
    added = set(upstreams) - before
    if not added:
        return None
    if not filed:
        downstream = downstream_of(graph)
    most = settings.JOBS_MAX_DOWNSTREAM
    for upstream in sorted(added):
        if len(downstream.get(upstream, ())) > most:
            return ValidationError(
                _(
                    "At most {most} jobs can run after one job (JOBS_MAX_DOWNSTREAM); "
                    "“{upstream}” would have {count}."
                ).format(most=most, upstream=upstream[:100], count=len(downstream[upstream])),
                code=CODE_TOO_MANY_DOWNSTREAM,
            )
    # Lengths measured from one job hold for every job only in a graph
    # without loops: a loop is cut where the walk from the job checked
    # closes it, so with one the walk starts afresh for each job.
    shared = filed and not workflow.cyclic
    up_memo, down_memo = (workflow.up_memo, workflow.down_memo) if shared else (None, None)
    chain = [
        *reversed(longest_path(graph, name, up_memo)),
        *longest_path(downstream, name, down_memo)[1:],
    ]
    deepest = settings.JOBS_MAX_CHAIN_DEPTH
    if len(chain) - 1 > deepest:
        return ValidationError(
            _(
                "A chain of jobs that run after one another can go at most {deepest} jobs deep after "
                "its first (JOBS_MAX_CHAIN_DEPTH); this one would go {depth}: {path}."
            ).format(deepest=deepest, depth=len(chain) - 1, path=_quoted_path(chain)),
            code=CODE_CHAIN_TOO_DEEP,
        )
    return None


def namespace_refusal(*, user, added: set[str]) -> ValidationError | None:
    """Why `user` may not make a job run after the jobs named `added` (its
    new upstreams): a chain crosses only into namespaces the user may edit."""
    if user is None or not added:
        return None
    allowed = access.namespaces_for(user, access.EDIT)
    if allowed is None:
        return None
    outside = sorted(Job.objects.named(*added).exclude(namespace__in=allowed).values_list("name", flat=True))
    if not outside:
        return None
    return ValidationError(
        _("You may not make a job run after {join}: your role does not reach their namespace.").format(
            join=", ".join(f"“{n[:100]}”" for n in outside[:5])
        ),
        code=CODE_UPSTREAM_NOT_EDITABLE,
    )


def rename_refusal(*, user, job: Job) -> ValidationError | None:
    """Why `user` may not rename `job`: a job that runs after it, whose
    `after` the rename rewrites, is in a namespace the user may not edit."""
    if user is None:
        return None
    allowed = access.namespaces_for(user, access.EDIT)
    if allowed is None:
        return None
    downstream = Job.objects.live().filter(upstream_links__upstream=job).exclude(namespace__in=allowed)
    names = sorted(set(downstream.values_list("name", flat=True)))
    if not names:
        return None
    return ValidationError(
        _("Not renamed: {join} run after this job, and your role may not change them.").format(
            join=", ".join(f"“{n[:100]}”" for n in names[:20])
        ),
        code=CODE_RENAME_REFERENCED,
    )


# How far the job page's chain reaches each way: the jobs it runs after and
# theirs, the jobs that run after it and theirs.
CHAIN_LEVELS = 2


@dataclass(frozen=True)
class ChainLink:
    """A job next to another in the graph: `job` runs after it (a
    downstream) or it runs after `job` (an upstream), on `on`; `further`
    holds the links one level out from `job` the same way."""

    job: Job
    on: str
    further: tuple["ChainLink", ...] = ()

    @property
    def on_label(self) -> str:
        return JobDependency.On(self.on).label


def chain_around(job: Job, *, user, levels: int = CHAIN_LEVELS) -> tuple[list[ChainLink], list[ChainLink]]:
    """(upstreams, downstreams) of `job`, `levels` deep, each side read with
    one query per level. Only jobs `user` may see are in it (a hidden job
    ends its branch). An upstream that was deleted stays in, marked by its
    `deleted_at` (its downstreams wait for it in vain); a deleted downstream
    is gone from the chain."""
    allowed = access.namespaces_for(user, access.VIEW)
    return (
        _chain(job, "upstream", "downstream", allowed, levels, live_only=False),
        _chain(job, "downstream", "upstream", allowed, levels, live_only=True),
    )


def _chain(job: Job, far: str, near: str, allowed, levels: int, *, live_only: bool) -> list[ChainLink]:
    seen, frontier = {job.pk}, [job.pk]
    by_level: list[dict[int, list[tuple[Job, str]]]] = []
    for _level in range(levels):
        if not frontier:
            break
        edges = JobDependency.objects.filter(**{f"{near}_id__in": frontier}).select_related(far)
        if allowed is not None:
            edges = edges.filter(**{f"{far}__namespace__in": allowed})
        if live_only:
            edges = edges.filter(**{f"{far}__deleted_at__isnull": True})
        found: dict[int, list[tuple[Job, str]]] = {}
        following = []
        for edge in edges.order_by(f"{far}__name", "id"):
            other = getattr(edge, far)
            found.setdefault(getattr(edge, f"{near}_id"), []).append((other, edge.on))
            if other.pk not in seen and other.deleted_at is None:
                seen.add(other.pk)
                following.append(other.pk)
        by_level.append(found)
        frontier = following

    def links(pk: int, depth: int) -> tuple[ChainLink, ...]:
        if depth >= len(by_level):
            return ()
        return tuple(
            ChainLink(job=other, on=on, further=links(other.pk, depth + 1) if other.pk != job.pk else ())
            for other, on in by_level[depth].get(pk, ())
        )

    return list(links(job.pk, 0))
