"""JobScope: a facade for code that embeds Cronboard, bound to one namespace.

    billing = JobScope("billing")

    @billing.handler("invoices")            # registered as "billing.invoices"
    class SendInvoices(JobHandler):
        def run(self, ctx): ...

    job = billing.create(name="send invoices", handler="invoices", cron_expression="0 0 6 * * *")
    billing.update(job, timeout_seconds=120)
    billing.runs(job).filter(status="failed")
    billing.delete(job)

A scope sees, changes and queries only jobs in its namespace; its python
jobs may use only its own handlers (names prefixed "billing."). Jobs are
validated by JobForm and written by jobs.services, exactly as the console
and the API do; the audit trail records them as `via=system` unless told
otherwise. It is trusted code: it acts without a user unless given one.
"""

from django.db.models import Q, QuerySet

from jobs import access, refusals, services, tasks
from jobs.forms import NAMESPACE_RE, JobForm
from jobs.handlers import registry
from jobs.handlers.registry import HandlerInfo
from jobs.models import AuditEvent, Job, Run, job_name
from jobs.serializers import spec_errors, spec_to_form_data


class JobValidationError(ValueError):
    """The job is invalid; `errors` is the list of {code, message, field}."""

    def __init__(self, errors: list[dict]):
        self.errors = errors
        super().__init__("; ".join(f"{e['field'] or 'job'}: {e['message']} ({e['code']})" for e in errors))


class JobScope:
    def __init__(self, namespace: str, *, user=None, via: str = AuditEvent.Via.SYSTEM):
        if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace) or len(namespace) > 100:
            raise ValueError(f"{namespace!r} is not a namespace: use lower-case letters, digits, - and _")
        self.namespace = namespace
        self.prefix = f"{namespace}."
        self.user = user
        self.via = via

    def __repr__(self):
        return f"JobScope({self.namespace!r})"

    # -- handlers --------------------------------------------------------------------

    def handler_name(self, name: str) -> str:
        """The registry name for one of this scope's handlers: "invoices" → "billing.invoices"."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a handler needs a name")
        name = name.strip()
        return name if name.startswith(self.prefix) else self.prefix + name

    def handler(self, name: str, *, task: bool = False):
        """Class decorator registering a handler under this scope's prefix
        (`task=True`: a task handler, as registry.register says)."""
        return registry.register(self.handler_name(name), task=task)

    def handlers(self) -> list[HandlerInfo]:
        return [info for info in registry.available() if info.name.startswith(self.prefix)]

    # -- jobs ------------------------------------------------------------------------------

    def jobs(self) -> QuerySet:
        """This scope's live jobs."""
        return access.jobs_in_namespace(self.namespace)

    def get(self, job) -> Job:
        """One of this scope's live jobs, by Job, id or name; Job.DoesNotExist otherwise."""
        if isinstance(job, Job):
            job = job.pk
        if isinstance(job, str):
            return self.jobs().get(name=job_name(job))
        return self.jobs().get(pk=job)

    def create(self, **fields) -> Job:
        data = self._form_data(fields)
        return self._save(data, job=None, version=None)

    def update(self, job, *, version: int | None = None, **fields) -> Job:
        """Change the given fields; the others keep their values. With
        `version`, refuse (refusals.StaleJobError) if the job changed since."""
        job = self.get(job)
        data = self._form_data(fields, job=job)
        return self._save(data, job=job, version=version)

    def delete(self, job) -> Job:
        return services.delete_job(job=self.get(job), user=self.user, via=self.via)

    def pause(self, job) -> Job:
        return services.pause_job(job=self.get(job), user=self.user, via=self.via)

    def resume(self, job) -> Job:
        return services.resume_job(job=self.get(job), user=self.user, via=self.via)

    def run_now(self, job) -> tuple[Run, bool]:
        return services.run_now(job=self.get(job), user=self.user, via=self.via)

    # -- runs and tasks ----------------------------------------------------------------

    def runs(self, job=None) -> QuerySet:
        """Runs of this scope's jobs and its one-off tasks, newest scheduled
        first; with `job`, that job's runs only."""
        if job is not None:
            runs = Run.objects.filter(job=self.get(job))
        else:
            runs = Run.objects.filter(
                Q(job__namespace=self.namespace, job__deleted_at__isnull=True)
                | Q(job__isnull=True, trigger=Run.Trigger.TASK, handler__startswith=self.prefix)
            )
        return runs.order_by("-scheduled_at", "-id")

    def enqueue(self, handler: str, *, key: str, **options) -> Run:
        """A one-off task for one of this scope's handlers (see tasks.enqueue)."""
        return tasks.enqueue(self.handler_name(handler), key=key, **options)

    # -- internals ------------------------------------------------------------------------

    def _form_data(self, fields: dict, *, job: Job | None = None) -> dict:
        namespace = fields.pop("namespace", self.namespace)
        if namespace != self.namespace:
            raise JobValidationError(
                [
                    {
                        "code": "forbidden",
                        "message": f"This scope only manages namespace “{self.namespace}”.",
                        "field": "namespace",
                    }
                ]
            )
        errors = spec_errors(fields)
        if errors:
            raise JobValidationError(errors)
        data = spec_to_form_data(fields, instance=job)
        data["namespace"] = self.namespace
        kind = data.get("kind") or Job.Kind.PYTHON
        if kind == Job.Kind.PYTHON and data.get("handler"):
            data["handler"] = self.handler_name(data["handler"])
        return data

    def _save(self, data: dict, *, job: Job | None, version: int | None) -> Job:
        form = JobForm(data, instance=job, user=self.user)
        if not form.is_valid():
            raise JobValidationError(form.error_list())
        try:
            return services.save_job(
                job=form.save(commit=False), user=self.user, via=self.via, expected_version=version
            )
        except refusals.GraphRefused as exc:
            raise JobValidationError(exc.error_list()) from None
