"""Jobs as code, from the command line.

manage.py jobs import FILE          upsert by name, all-or-nothing; a job
                                    whose spec equals what is stored is left
                                    alone (no version bump, no audit row, its
                                    next fire kept); reports created /
                                    updated / unchanged
manage.py jobs export [NAME ...]    the same JSON format
manage.py jobs import-calendars FILE  custom calendars, upserted by name,
                                    all-or-nothing
manage.py jobs export-calendars     the same JSON format
manage.py jobs list
manage.py jobs runs NAME [--limit N] [--json]
manage.py jobs run NAME             queue a manual run
manage.py jobs pause NAME
manage.py jobs resume NAME          also re-enables a crashed job
manage.py jobs backfill NAME --from T --to T [--parallel N] [--include-succeeded] [--dry-run]
                                    run the past fires of a range again
manage.py jobs backfill-cancel ID   cancel a backfill as a whole
manage.py jobs pools                concurrency pools: size, live runs, jobs
manage.py jobs pool NAME --size N   create a pool or change its size
manage.py jobs pool NAME --delete   delete a pool no job uses
"""

import json
import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from jobs import backfills, calendars, checks, imports, pools, refusals, services, workdays
from jobs.i18n import activate_for_people_without_a_session
from jobs.models import AuditEvent, Backfill, Job, WorkCalendar, job_name
from jobs.serializers import PAGE_CHUNK_ROWS, RUN_FIELDS, job_to_spec, run_to_dict
from jobs.text import find_unstorable, storable

CLI = AuditEvent.Via.CLI


class Command(BaseCommand):
    help = "Import, export, list and act on jobs."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        p = sub.add_parser("import", help="Create or update jobs from a JSON file (- for stdin).")
        p.add_argument("file")
        p = sub.add_parser("export", help="Print jobs as JSON (all live jobs, or the named ones).")
        p.add_argument("names", nargs="*")
        p.add_argument(
            "--with-secrets",
            action="store_true",
            help="Accepted for older scripts: jobs name their alert channels, whose URLs are not exported.",
        )
        p = sub.add_parser("import-calendars", help="Create or update custom calendars from a JSON file.")
        p.add_argument("file")
        sub.add_parser("export-calendars", help="Print the custom calendars as JSON.")
        sub.add_parser("list", help="One line per live job.")
        p = sub.add_parser("runs", help="A job's runs, newest scheduled first.")
        p.add_argument("name")
        p.add_argument("--limit", type=int, default=20)
        p.add_argument("--json", dest="as_json", action="store_true", help="One JSON object per line.")
        p = sub.add_parser("run", help="Queue a manual run.")
        p.add_argument("name")
        p.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="Override a property for this run only (repeatable).",
        )
        p = sub.add_parser("backfill", help="Run a job's past fires in a range again.")
        p.add_argument("name")
        p.add_argument("--from", dest="range_start", required=True, help="ISO 8601 (an offset, or UTC).")
        p.add_argument("--to", dest="range_end", required=True, help="ISO 8601, not in the future.")
        p.add_argument("--parallel", type=int, default=1, help="Runs at once, in fire order (default 1).")
        p.add_argument("--include-succeeded", action="store_true", help="Also fires that succeeded.")
        p.add_argument("--dry-run", action="store_true", help="Only count the fires.")
        sub.add_parser("backfill-cancel", help="Cancel a backfill as a whole.").add_argument("id", type=int)
        sub.add_parser("pools", help="Concurrency pools.")
        p = sub.add_parser("pool", help="Create, resize or delete a concurrency pool.")
        p.add_argument("pool")
        p.add_argument("--size", type=int)
        p.add_argument("--description", default="")
        p.add_argument("--delete", action="store_true")
        for action, text in [
            ("pause", "Pause a job."),
            ("resume", "Resume a paused job or re-enable a crashed one."),
        ]:
            sub.add_parser(action, help=text).add_argument("name")

    def handle(self, *args, action, **options):
        activate_for_people_without_a_session()
        checks.require_migrated()
        # Bytes on the command line that are not UTF-8 arrive as lone
        # surrogates (Python's surrogateescape): a job name with them is
        # refused here, as at every other door, before a query fails on it.
        names = [options.get("name"), *(options.get("names") or [])]
        if problem := find_unstorable([name for name in names if name is not None]):
            raise CommandError(
                _("The job name contains %(problem)s, which cannot be stored.") % {"problem": problem}
            )
        getattr(self, f"do_{action.replace('-', '_')}")(**options)

    # -- import / export --------------------------------------------------------

    def do_import(self, file, **_options):
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(
                _("cannot read {file}: {strerror}").format(file=file, strerror=exc.strerror)
            ) from None
        try:
            specs = imports.parse(text, source=file)
            created, updated, unchanged = imports.apply(specs)
        except imports.ImportFileError as exc:
            raise CommandError(storable(str(exc))) from None
        except imports.ImportFailed as failed:
            for error in failed.errors:
                # A message may quote the bad input (a NUL, a lone surrogate).
                self.stderr.write(
                    storable(
                        f"error {error['code']}: job {error['job']!r}, field {error['field'] or '-'}: {error['message']}"
                    )
                )
            raise CommandError(
                _("{value} error(s); nothing was saved.").format(value=len(failed.errors))
            ) from None
        self.stdout.write(
            _("imported {value} job(s): {created} created, {updated} updated, {unchanged} unchanged").format(
                value=len(specs), created=created, updated=updated, unchanged=unchanged
            )
        )

    def do_export(self, names, **_options):
        jobs = Job.objects.live().order_by("name")
        if names:
            names = [job_name(name) for name in names]
            jobs = Job.objects.named(*names).order_by("name")
            missing = sorted(set(names) - set(jobs.values_list("name", flat=True)))
            if missing:
                raise CommandError(_("no such job: {join}").format(join=", ".join(missing)))
        # Written job by job: however large the jobs, one is held at a time.
        self.stdout.write("[", ending="")
        for index, job in enumerate(jobs.iterator(chunk_size=PAGE_CHUNK_ROWS)):
            text = json.dumps(job_to_spec(job), indent=2, ensure_ascii=False)
            self.stdout.write(("," if index else "") + "\n" + text, ending="")
        self.stdout.write("\n]")

    def do_import_calendars(self, file, **_options):
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
            created, updated = calendars.import_calendars(imports.parse_json(text, source=file), via=CLI)
        except OSError as exc:
            raise CommandError(
                _("cannot read {file}: {strerror}").format(file=file, strerror=exc.strerror)
            ) from None
        except imports.ImportFileError as exc:
            raise CommandError(storable(str(exc))) from None
        except workdays.CalendarError as exc:
            where = getattr(exc, "calendar", None)
            self.stderr.write(
                storable(
                    f"error {exc.code}: calendar {where!r}, field {getattr(exc, 'field', '-')}: {exc.message}"
                )
            )
            raise CommandError(_("nothing was saved.")) from None
        self.stdout.write(
            _("imported {value} calendar(s): {created} created, {updated} updated").format(
                value=created + updated, created=created, updated=updated
            )
        )

    def do_export_calendars(self, **_options):
        rows = [calendars.export(row) for row in WorkCalendar.objects.order_by("name")]
        self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))

    # -- reading ------------------------------------------------------------------

    def do_list(self, **_options):
        rows = Job.objects.live().order_by("name")
        for job in rows:
            schedule = (
                job.cron_expression
                if job.schedule_type == Job.ScheduleType.CRON
                else f"every {job.interval_seconds}s"
            )
            next_fire = job.next_fire_at.isoformat() if job.next_fire_at else "-"
            self.stdout.write(
                f"{job.name}\t{job.kind}\t{schedule}\t{job.timezone}\t{job.state}\tnext {next_fire}\tlast {job.last_status or '-'}"
            )

    def do_runs(self, name, limit, as_json, **_options):
        if not 1 <= limit <= 10_000:
            raise CommandError(_("--limit must be between 1 and 10000"))
        job = self._job(name)
        runs = job.runs.order_by("-scheduled_at", "-id")[:limit]
        for run in runs:
            if as_json:
                data = run_to_dict(run)
                self.stdout.write(json.dumps({k: data[k] for k in RUN_FIELDS}))
            else:
                self.stdout.write(
                    f"{run.scheduled_at.isoformat()}\tattempt {run.attempt}\t{run.trigger}\t{run.status}"
                    f"{'/' + run.skip_reason if run.skip_reason else ''}\t{run.duration_ms if run.duration_ms is not None else '-'} ms"
                    f"\t{(run.error or run.result).splitlines()[0][:100] if (run.error or run.result) else ''}"
                )

    # -- actions ------------------------------------------------------------------

    def do_run(self, name, overrides=(), **_options):
        properties = {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CommandError(_("--set takes KEY=VALUE, not “{item}”.").format(item=item))
            if key.strip() in properties:
                raise CommandError(_("--set names “{strip}” twice.").format(strip=key.strip()))
            properties[key.strip()] = value
        try:
            run, created = services.run_now(job=self._job(name), via=CLI, properties=properties or None)
        except refusals.ServiceError as exc:
            raise CommandError(storable(str(exc))) from None
        except ValidationError as exc:
            raise CommandError(storable(f"Invalid --set: {' '.join(exc.messages)}")) from None
        self.stdout.write(
            (_("queued: run {pk} of {name}") if created else _("already queued: run {pk} of {name}")).format(
                pk=run.pk, name=name
            )
        )

    def do_pause(self, name, **_options):
        try:
            services.pause_job(job=self._job(name), via=CLI)
        except refusals.ServiceError as exc:
            raise CommandError(storable(str(exc))) from None
        self.stdout.write(_("paused {name}").format(name=name))

    def do_resume(self, name, **_options):
        try:
            job = services.resume_job(job=self._job(name), via=CLI)
        except refusals.ServiceError as exc:  # e.g. an HTTP job in demo mode
            raise CommandError(storable(str(exc))) from None
        self.stdout.write(
            _("{name} enabled; next fire {isoformat}").format(
                name=name, isoformat=job.next_fire_at.isoformat() if job.next_fire_at else "-"
            )
        )

    # -- backfills and pools ----------------------------------------------------------

    def do_backfill(self, name, range_start, range_end, parallel, include_succeeded, dry_run, **_options):
        job = self._job(name)
        form = backfills.BackfillForm(
            {
                "range_start": range_start,
                "range_end": range_end,
                "parallel": parallel,
                "include_succeeded": include_succeeded,
            }
        )
        if not form.is_valid():
            raise CommandError(
                storable(
                    "; ".join(
                        f"--{e['field'].replace('range_', '')}: {e['message']}" for e in form.error_list()
                    )
                )
            )
        data = form.cleaned_data
        try:
            if dry_run:
                plan = backfills.plan_backfill(
                    job=job,
                    start=data["range_start"],
                    end=data["range_end"],
                    include_succeeded=include_succeeded,
                )
                self.stdout.write(
                    _("{fires} fire(s) to run; {succeeded} left out (they succeeded)").format(
                        fires=len(plan.fires), succeeded=plan.succeeded
                    )
                )
                return
            backfill = backfills.start_backfill(
                job=job,
                start=data["range_start"],
                end=data["range_end"],
                parallel=data["parallel"],
                include_succeeded=include_succeeded,
                via=CLI,
            )
        except backfills.BackfillRefused as exc:
            raise CommandError(f"error {exc.code}: {exc}") from None
        except refusals.ServiceError as exc:
            raise CommandError(storable(str(exc))) from None
        self.stdout.write(
            _("backfill {pk}: {fires} run(s) of {name}, {parallel} at a time").format(
                pk=backfill.pk, fires=backfill.fires, name=job.name, parallel=backfill.parallel
            )
        )

    def do_backfill_cancel(self, id, **_options):
        backfill = Backfill.objects.select_related("job").filter(pk=id).first()
        if backfill is None:
            raise CommandError(_("no such backfill: {pk}").format(pk=id))
        reached = backfills.cancel_backfill(backfill=backfill, via=CLI)
        self.stdout.write(_("backfill {pk} cancelled: {reached} run(s)").format(pk=id, reached=reached))

    def do_pools(self, **_options):
        for row in pools.pool_rows():
            self.stdout.write(f"{row['name']}\tsize {row['size']}\tlive {row['live']}\tjobs {row['jobs']}")

    def do_pool(self, pool, size, description, delete, **_options):
        try:
            if delete:
                if not pools.delete_pool(name=pool, via=CLI):
                    raise CommandError(_("no such pool: {name}").format(name=pool))
                self.stdout.write(_("pool {name} deleted").format(name=pool))
                return
            if size is None:
                raise CommandError(_("give --size N (or --delete)"))
            pools.save_pool(name=pool, size=size, description=description, via=CLI)
        except pools.PoolRefused as exc:
            raise CommandError(f"error {exc.code}: {exc}") from None
        self.stdout.write(_("pool {name}: size {size}").format(name=pool, size=size))

    def _job(self, name) -> Job:
        job = Job.objects.named(name).first()
        if job is None:
            raise CommandError(_("no such job: {name!r}").format(name=name))
        return job
