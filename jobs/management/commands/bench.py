"""python manage.py bench <scheduler|shards|preview|pages|retention> [options] [--json]

Benchmarks that print figures. Each creates its own throw-away database (a
temporary SQLite file, or a new database on the PostgreSQL server named by
--database-url) and never touches the configured one; see jobs/bench/.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.bench import throwaway
from jobs.cron import MIN_INTERVAL_SECONDS


class Command(BaseCommand):
    help = "Benchmarks: scheduler throughput and lateness, cron preview, console pages, retention."
    # The parent never opens the configured database; the checks need not either.
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True)

        p = sub.add_parser(
            "scheduler", help="N interval jobs with a no-op handler, fired by real runscheduler processes"
        )
        p.add_argument("--jobs", type=int, default=1000)
        p.add_argument("--interval", type=int, default=5, help="seconds between fires of one job (≥ 5)")
        p.add_argument("--duration", type=float, default=60, help="seconds of fires measured")
        p.add_argument(
            "--schedulers", type=int, default=1, help="scheduler processes (PostgreSQL only for > 1)"
        )
        p.add_argument(
            "--find-max",
            action="store_true",
            help="raise the load until lateness p99 passes 1 s or fires go missing; report the highest sustained fires/s",
        )
        p.add_argument("--start-rate", type=int, default=200, help="--find-max: the first load, in fires/s")
        p.add_argument(
            "--metrics",
            choices=["off", "on", "per-job"],
            default="off",
            help="serve Prometheus metrics from each scheduler (per-job: with JOBS_METRICS_PER_JOB) "
            "and scrape them while measuring",
        )
        p.add_argument(
            "--step-cpu",
            action="store_true",
            help="--metrics: the schedulers count each engine step's CPU time (JOBS_METRICS_STEP_CPU) "
            "and the bench shows each step's share",
        )
        p.add_argument(
            "--scrape-every",
            type=float,
            default=15,
            help="--metrics: seconds between scrapes (Prometheus' usual 15)",
        )
        p.add_argument(
            "--cron",
            action="store_true",
            help="cron jobs (H/INTERVAL in the seconds, spread by H) instead of interval jobs",
        )
        p.add_argument(
            "--calendar", default="", help="cron jobs on this calendar (CN, US-CA, …): the calendar's cost"
        )
        p.add_argument("--rule", default="working_days", help="with --calendar: the calendar rule")
        self._common(p)

        p = sub.add_parser("shards", help="one fire of a sharded job: planning it, and running every shard")
        p.add_argument("--shards", type=int, default=1000)
        p.add_argument(
            "--schedulers", type=int, default=1, help="scheduler processes (PostgreSQL only for > 1)"
        )
        p.add_argument("--repeat", type=int, default=5, help="timed planning passes")
        p.add_argument("--timeout", type=float, default=300, help="seconds to wait for the shards")
        self._common(p)

        p = sub.add_parser("preview", help="cron parse + next five fire times, beside croniter")
        p.add_argument("--repeat", type=int, default=200, help="timings per expression")
        p.add_argument(
            "--view",
            action="store_true",
            help="time the console's preview view (GET /cron/preview/) with and without a calendar instead",
        )
        self._common(p, database=False)

        p = sub.add_parser("pages", help="console pages over a big, bulk-seeded history")
        p.add_argument("--jobs", type=int, default=10_000)
        p.add_argument("--runs", type=int, default=1_000_000)
        p.add_argument("--repeat", type=int, default=30, help="timed requests per page")
        self._common(p)

        p = sub.add_parser(
            "retention", help="the retention job deleting expired runs while the scheduler fires"
        )
        p.add_argument("--runs", type=int, default=1_000_000)
        p.add_argument("--jobs", type=int, default=1000, help="jobs firing meanwhile (every 5 s)")
        p.add_argument(
            "--before", type=float, default=20, help="seconds of fires measured before the cleanup"
        )
        self._common(p)

    @staticmethod
    def _common(p, *, database=True):
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        if database:
            p.add_argument(
                "--database-url",
                default="",
                help="a PostgreSQL server (postgres://user@host:port/any): a fresh database is created on it "
                "and dropped afterwards. Default: a temporary SQLite file.",
            )
            p.add_argument(
                "--keep", action="store_true", help="keep the throw-away database and logs (for debugging)"
            )

    def handle(self, *args, what, **options):
        if throwaway.inside():
            return self.inside(what)
        if what == "preview" and not options["view"]:
            # Nothing to store: no database, no child.
            from jobs.bench import preview

            rows, planning = preview.run(options), preview.planning_cost()
            self.stdout.write(
                json.dumps({"expressions": rows, "planning": planning})
                if options["json"]
                else preview.render(rows, planning)
            )
            return
        options = {
            k: v
            for k, v in options.items()
            if k
            not in (
                "verbosity",
                "settings",
                "pythonpath",
                "traceback",
                "no_color",
                "force_color",
                "skip_checks",
            )
        }
        if what == "shards" and (
            not 1 <= options["shards"] <= 1000 or (options["schedulers"] > 1 and not options["database_url"])
        ):
            raise CommandError("--shards: 1 to 1,000; --schedulers > 1 needs --database-url postgres://…")
        if what == "scheduler":
            self._check_scheduler_options(options)
            if options["find_max"]:
                return self.find_max(options)
        self.in_child(what, options)

    def _check_scheduler_options(self, options):
        if options["interval"] < MIN_INTERVAL_SECONDS:
            raise CommandError(f"--interval: the minimum interval is {MIN_INTERVAL_SECONDS} s")
        if options["schedulers"] < 1 or options["jobs"] < 1 or options["duration"] <= 0:
            raise CommandError("--jobs, --schedulers and --duration must be positive")
        if options["schedulers"] > 1 and not options["database_url"]:
            raise CommandError("SQLite is single-node: --schedulers > 1 needs --database-url postgres://…")
        if options.get("calendar"):
            from jobs import workdays

            try:
                options["calendar"] = workdays.builtin_code(options["calendar"])
            except workdays.CalendarError as exc:
                raise CommandError(f"--calendar: {exc.message}") from None
            if options["rule"] not in workdays.RULES:
                raise CommandError(f"--rule: one of {', '.join(workdays.RULES)}")
        if (options.get("cron") or options.get("calendar")) and 60 % options["interval"]:
            raise CommandError("--cron, --calendar: the interval must divide 60 (a cron step in the seconds)")

    def in_child(self, what: str, options: dict, *, capture: bool = False):
        db = throwaway.create(options.get("database_url") or None)
        try:
            result = throwaway.run_child(db, what, options, capture=capture)
        finally:
            if options.get("keep"):
                self.stderr.write(f"kept: {db.url} (work directory {db.workdir})")
            else:
                db.drop()
        if result.returncode != 0:
            raise CommandError(f"bench {what} failed (exit status {result.returncode})")
        return result.stdout

    def inside(self, what: str):
        """The child: the benchmark itself, on the throw-away database."""
        from django.core.management import call_command

        options, workdir = throwaway.ensure_inside()
        call_command("migrate", verbosity=0, interactive=False)
        if what == "preview":  # --view: the console's preview, signed in
            from jobs.bench import previewview as bench

            figures = bench.run(options)
            out = json.dumps(figures) if options["json"] else bench.render(figures)
        elif what == "scheduler":
            from jobs.bench import scheduler as bench

            figures = bench.run(options, workdir)
            out = json.dumps(bench.public(figures)) if options["json"] else bench.render(options, figures)
        elif what == "shards":
            from jobs.bench import shards as bench

            figures = bench.run(options, workdir)
            out = json.dumps(figures) if options["json"] else bench.render(options, figures)
        elif what == "retention":
            from jobs.bench import retention as bench

            figures = bench.run(options, workdir)
            out = json.dumps(figures) if options["json"] else bench.render(options, figures)
        else:
            from jobs.bench import pages as bench

            figures = bench.run(options)
            out = json.dumps(figures) if options["json"] else bench.render(figures)
        self.stdout.write(out)

    def find_max(self, options: dict):
        """Raise the load until lateness p99 passes 1 s or fires go missing;
        each step on a fresh database."""
        from jobs.bench.report import fmt, table

        rate, best, steps = options["start_rate"], None, []
        good, bad = None, None
        while len(steps) < 12:
            step = {
                **options,
                "find_max": False,
                "json": True,
                "jobs": max(1, round(rate * options["interval"])),
            }
            figures = json.loads(self.in_child("scheduler", step, capture=True))
            ok = (
                figures["missed"] == 0
                and figures["duplicates"] == 0
                and (figures["lateness_ms"]["p99"] or 0) <= 1000
            )
            steps.append({"target_fires_per_s": rate, "jobs": step["jobs"], "ok": ok, **figures})
            if not options["json"]:
                self.stderr.write(
                    f"  {rate:>6,} fires/s target: {figures['fires_per_s']:,} run, p99 "
                    f"{fmt(figures['lateness_ms']['p99'], 'ms')}, missed {figures['missed']:,} → {'ok' if ok else 'over'}"
                )
            if ok:
                good = rate
                best = max(best or 0, figures["fires_per_s"])
            else:
                bad = rate
            if bad is None:
                rate = int(rate * 1.5)
            elif good is None or bad - good <= max(50, good // 10):
                break
            else:
                rate = (good + bad) // 2
        result = {"max_sustained_fires_per_s": best, "steps": steps}
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        rows = [
            (
                fmt(s["target_fires_per_s"]),
                fmt(s["jobs"]),
                fmt(s["fires_per_s"]),
                fmt(s["lateness_ms"]["p99"], "ms"),
                fmt(s["missed"]),
                fmt(s["duplicates"]),
                fmt(s["cpu_ms_per_fire"], "ms"),
                " / ".join(fmt(c) for c in s["cpu_share"]),
                "-" if s["server"] is None else fmt(s["server"]["server_cpu_ms_per_fire"], "ms"),
                "ok" if s["ok"] else "over",
            )
            for s in steps
        ]
        self.stdout.write(
            f"bench scheduler --find-max: {options['interval']} s interval jobs, {options['duration']:g} s per step\n"
            + table(
                rows,
                [
                    "target fires/s",
                    "jobs",
                    "fires/s run",
                    "p99",
                    "missed",
                    "dup",
                    "CPU/fire",
                    "CPU use",
                    "PostgreSQL CPU/fire",
                    "",
                ],
            )
            + f"\nhighest sustained: {fmt(best)} fires/s"
        )
