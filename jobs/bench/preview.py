"""`bench preview`: parse + the next five fire times for a fixed corpus of
expressions, per-expression µs p50/p99, beside croniter's own time for the
ones croniter parses, measured in the same run (interleaved, so both see the
same machine).

Ours is timed cold: the parse caches are cleared before every timing, so the
figure is what the cron editor pays for an expression it has not seen. The
same five fires with a working-day calendar (China's, `working_days`) are
timed beside it, the calendar's per-year tables warm as in a running
process: what the calendar adds to a preview.
"""

import time
from datetime import UTC, datetime

from jobs import cron, workdays
from jobs.bench.report import fmt, summary, table

AFTER = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

# (expression, zone, what it exercises)
CORPUS = [
    ("* * * * * *", "UTC", "every second"),
    ("0 */5 * * * *", "UTC", "step"),
    ("5/15 10-20 * * * ?", "UTC", "start/step, range, ?"),
    ("0 0 9 * * MON-FRI", "Europe/London", "named day range"),
    ("0 15 10 ? JAN-MAR,OCT MON,WED", "Europe/Paris", "named lists"),
    ("0 0 12 1,15 * ?", "Asia/Kolkata", "list, +05:30 zone"),
    ("0 30 3 * * ?", "UTC", "the retention job"),
    ("0 0 0 L * ?", "UTC", "last day of month"),
    ("0 0 0 L-3 * ?", "America/Sao_Paulo", "L-n"),
    ("0 0 9 15W * ?", "UTC", "nearest weekday"),
    ("0 0 9 LW * ?", "Australia/Sydney", "last weekday"),
    ("0 0 18 ? * 5L", "America/New_York", "last Friday"),
    ("0 0 9 ? * 5#3", "America/New_York", "third Friday"),
    ("0 30 2 * * *", "America/New_York", "DST gap (spring forward)"),
    ("0 */30 1 * * *", "America/New_York", "DST overlap, interval-based"),
    ("0 30 1 * * *", "Australia/Lord_Howe", "30-minute DST shift"),
    ("@hourly", "UTC", "alias"),
    ("@weekly", "Pacific/Auckland", "alias, southern DST"),
    ("0 0 0 1 1 ?", "UTC", "yearly"),
    ("0 0 0 29 2 ?", "UTC", "sparse: 29 February"),
    ("0 0 9 ? 2 1#5", "Europe/Berlin", "sparse: a fifth Monday in February"),
    ("0 0 0 31 * ?", "UTC", "31st (skips short months)"),
]


def _ours(expr: str, zone: str) -> list[datetime]:
    return cron.parse(expr).next_n(AFTER, zone, 5)


_CALENDAR = workdays.DayRule(workdays.builtin("CN"), workdays.WORKING_DAYS)


def _with_calendar(expr: str, zone: str) -> list:
    fires = []
    for step in cron.parse(expr).walk(AFTER, zone, days=_CALENDAR):
        if isinstance(step, cron.Uncovered):
            break
        if isinstance(step, cron.Fire):
            fires.append(step.at)
            if len(fires) == 5:
                break
    return fires


# The planner's side of a calendar: Job.next_fire_after, CPU time, for cron
# jobs fired every 5 s in Shanghai from a Monday (a working day in China).
PLANNING_AFTER = datetime(2025, 9, 29, 2, tzinfo=UTC)


def planning_cost(jobs: int = 1000, rounds: int = 4, repeat: int = 5) -> dict:
    """µs of CPU per next-fire computation, median of `repeat`, without a
    calendar and with CN working_days (unsaved jobs: a built-in calendar
    needs no database)."""
    from jobs.models import Job

    def make(calendar: str) -> list:
        return [
            Job(
                name=f"bench-{n:06d}",
                schedule_type="cron",
                cron_expression="H/5 * * * * *",
                timezone="Asia/Shanghai",
                calendar=calendar,
            )
            for n in range(jobs)
        ]

    def cost(batch: list) -> float:
        started = time.process_time()
        for job in batch:
            at = PLANNING_AFTER
            for _ in range(rounds):
                at = job.next_fire_after(at)
        return (time.process_time() - started) * 1_000_000 / (len(batch) * rounds)

    plain, calendar = make(""), make("CN")
    cost(plain), cost(calendar)  # warm: parse caches, the year's holidays
    timings = [(cost(plain), cost(calendar)) for _ in range(repeat)]
    middle = repeat // 2
    return {
        "plain_us": round(sorted(t[0] for t in timings)[middle], 1),
        "calendar_us": round(sorted(t[1] for t in timings)[middle], 1),
    }


def _croniter_expression(expr: str) -> str:
    # croniter takes the same six fields, seconds first, with this flag; its
    # aliases have five fields.
    return expr


def _theirs(expr: str, zone: str) -> list[datetime]:
    from croniter import croniter

    start = AFTER.astimezone(cron.get_zone(zone))
    if expr.startswith("@"):
        it = croniter(expr, start)
    else:
        it = croniter(expr, start, second_at_beginning=True)
    return [it.get_next(datetime).astimezone(UTC) for _ in range(5)]


def _clear_caches() -> None:
    for fn in (getattr(cron, "_compile", None), getattr(cron, "_normalize_text", None)):
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()


def _time(fn, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - started) * 1_000_000


def run(options: dict) -> list[dict]:
    repeat = options["repeat"]
    rows = []
    for expr, zone, what in CORPUS:
        ours_times, theirs_times, calendar_times = [], [], []
        mine = _ours(expr, zone)
        _with_calendar(expr, zone)
        try:
            theirs = _theirs(expr, zone)
            croniter_ok = True
        except Exception:
            theirs, croniter_ok = None, False
        for _ in range(repeat):
            _clear_caches()
            ours_times.append(_time(_ours, expr, zone))
            _clear_caches()
            calendar_times.append(_time(_with_calendar, expr, zone))
            if croniter_ok:
                theirs_times.append(_time(_theirs, expr, zone))
        ours, croniter_s = (
            summary(ours_times, digits=1),
            summary(theirs_times, digits=1) if croniter_ok else None,
        )
        rows.append(
            {
                "expression": expr,
                "zone": zone,
                "what": what,
                "us": ours,
                "croniter_us": croniter_s,
                "ratio_p50": round(ours["p50"] / croniter_s["p50"], 2) if croniter_ok else None,
                "calendar_us": summary(calendar_times, digits=1),
                "same_times": (theirs == mine) if croniter_ok else None,
            }
        )
    return rows


def render(rows: list[dict], planning: dict | None = None) -> str:
    body = [
        (
            r["expression"],
            r["zone"],
            fmt(r["us"]["p50"]),
            fmt(r["us"]["p99"]),
            fmt(r["croniter_us"]["p50"]) if r["croniter_us"] else "n/a",
            fmt(r["croniter_us"]["p99"]) if r["croniter_us"] else "n/a",
            fmt(r["ratio_p50"]) if r["ratio_p50"] is not None else "-",
            {True: "same", False: "differ", None: "-"}[r["same_times"]],
            fmt(r["calendar_us"]["p50"]),
            fmt(round(r["calendar_us"]["p50"] / r["us"]["p50"], 2)),
        )
        for r in rows
    ]
    worst = max(r["us"]["p99"] for r in rows)
    plain_total = sum(r["us"]["p50"] for r in rows)
    calendar_total = sum(r["calendar_us"]["p50"] for r in rows)
    ratios = [r["ratio_p50"] for r in rows if r["ratio_p50"] is not None]
    return (
        "bench preview: parse + next 5 fire times, cold caches, µs per expression\n"
        + table(
            body,
            [
                "expression",
                "zone",
                "p50",
                "p99",
                "croniter p50",
                "croniter p99",
                "×croniter",
                "times",
                "CN p50",
                "×plain",
            ],
        )
        + f"\nworst p99: {fmt(worst)} µs; ours / croniter (p50) from {fmt(min(ratios))} to {fmt(max(ratios))}"
        + f"; croniter parses {len(ratios)} of {len(rows)}"
        + f"\nwith the CN working_days calendar (CN p50 / p50): total {fmt(calendar_total)} µs against "
        + f"{fmt(plain_total)} µs, ×{fmt(round(calendar_total / plain_total, 2))}"
        + (
            f"\nplanner, Job.next_fire_after (CPU, µs per fire): {fmt(planning['plain_us'])} without a calendar, "
            f"{fmt(planning['calendar_us'])} with CN working_days"
            if planning
            else ""
        )
    )
