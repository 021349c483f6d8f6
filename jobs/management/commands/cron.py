"""`manage.py cron next "EXPR" [--tz ZONE] [--after ISO8601] [--count N]
[--calendar CAL [--rule RULE]] [--name NAME] [--jitter SECONDS]` prints the
next fire times, one ISO-8601 UTC instant per line. With a calendar, the
dates it skips come between them as `# skipped 2025-10-01 National Day`
lines, a make-up working day's time is followed by `# make-up working day
…`, and `# calendar data for 2027 missing` ends the list where the
installed data does. `--name` is the job's name, the seed H reads.

`manage.py cron next --jsonl` reads `{"expr", "tz", "start"}` objects, one per
line, from stdin and writes one result line per input line, in order:
`{"next": [...]}` or `{"error": {"code", "message"}}`.

User mistakes never produce a traceback: they print `error <code>: <message>`
on stderr and exit with status 1.
"""

import json
import sys
from datetime import UTC, datetime

from django.core.management.base import BaseCommand
from django.db import DatabaseError
from django.utils import timezone as django_timezone

from jobs.calendars import preview_days, preview_jitter
from jobs.cron import (
    MALFORMED,
    MAX_PREVIEW_COUNT,
    OUT_OF_RANGE,
    CronError,
    Skipped,
    Uncovered,
    get_zone,
    iso_utc,
    parse,
    zone_name,
)
from jobs.workdays import RULES, CalendarError

JSONL_COUNT = 5


def format_utc(when: datetime) -> str:
    return iso_utc(when)


def parse_instant(text, what: str) -> datetime:
    """ISO 8601 with Z or an offset; a naive value is taken as UTC."""
    if not isinstance(text, str) or not text.strip():
        raise CronError(MALFORMED, f"{what} must be an ISO 8601 date-time, e.g. 2026-03-08T07:00:00Z")
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CronError(
            MALFORMED, f"{what} {text!r} is not an ISO 8601 date-time, e.g. 2026-03-08T07:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


def parse_jitter(text) -> int:
    seconds = preview_jitter(text)
    if str(seconds) != str(text).strip():
        raise CronError(OUT_OF_RANGE, f"--jitter must be a whole number of seconds 0-3600, got {text!r}")
    return seconds


def parse_count(text) -> int:
    try:
        count = int(str(text).strip())
    except ValueError:
        raise CronError(MALFORMED, f"--count must be a whole number, got {text!r}") from None
    if not 1 <= count <= MAX_PREVIEW_COUNT:
        raise CronError(OUT_OF_RANGE, f"--count must be 1-{MAX_PREVIEW_COUNT}, got {count}")
    return count


def next_times(expr, tz_name, after: datetime, count: int) -> list[str]:
    schedule = parse(expr)
    # An empty zone means UTC here as in --jsonl, the job form and the API.
    zone = get_zone(zone_name(tz_name))
    return [format_utc(when) for when in schedule.next_n(after, zone, count)]


def calendar_lines(expr, tz_name, after: datetime, count: int, *, days, seed: str, jitter: int) -> list[str]:
    """The lines of `cron next` with a calendar, H's seed or jitter."""
    zone = get_zone(zone_name(tz_name))
    lines, fires = [], 0
    for step in parse(expr, seed).walk(after, zone, days=days, jitter=jitter, seed=seed):
        if isinstance(step, Skipped):
            lines.append(f"# skipped {step.day.isoformat()} {step.reason}".rstrip())
        elif isinstance(step, Uncovered):
            lines.append(f"# calendar data for {step.day.year} missing")
            break
        else:
            lines.append(f"{format_utc(step.at)}  # {step.note}" if step.note else format_utc(step.at))
            fires += 1
            if fires == count:
                break
    return lines


def jsonl_result(line: str) -> dict:
    """The answer for one input line; every failure becomes an error object."""
    try:
        if not line.strip():
            raise CronError(MALFORMED, "Empty line: expected a JSON object")
        try:
            request = json.loads(line)
        except ValueError:
            raise CronError(MALFORMED, "Line is not valid JSON") from None
        if not isinstance(request, dict):
            raise CronError(MALFORMED, 'Line must be a JSON object {"expr": ..., "tz": ..., "start": ...}')
        expr = request.get("expr")
        if not isinstance(expr, str):
            raise CronError(MALFORMED, '"expr" must be a string')
        tz_name = request.get("tz")
        if tz_name is not None and not isinstance(tz_name, str):
            raise CronError(MALFORMED, '"tz" must be a string')
        start = parse_instant(request.get("start"), '"start"')
        return {"next": next_times(expr, tz_name, start, JSONL_COUNT)}
    except CronError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}
    except (ValueError, OverflowError) as exc:  # e.g. a start too close to year 9999
        return {"error": {"code": MALFORMED, "message": str(exc)}}


class Command(BaseCommand):
    help = "Cron tools. `cron next EXPR` prints the next fire times (UTC)."
    # A calculator (a custom calendar is the one model it reads), and check
    # warnings would pollute stderr.
    requires_system_checks = []
    # call_command(..., stdin=io.StringIO(...)) feeds --jsonl in tests.
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        subcommands = parser.add_subparsers(dest="subcommand", required=True, metavar="{next}")
        next_parser = subcommands.add_parser(
            "next", help="Print the next fire times of an expression as ISO-8601 UTC."
        )
        next_parser.add_argument("expression", nargs="?", help='e.g. "0 30 3 * * ?" (quote it)')
        next_parser.add_argument("--tz", default="UTC", help="IANA time zone the fields are read in")
        next_parser.add_argument("--after", help="start instant, ISO 8601 (default: now); naive = UTC")
        # Parsed by hand so that bad values get our error line, not argparse's.
        next_parser.add_argument("--count", default="5", help=f"how many (1-{MAX_PREVIEW_COUNT}, default 5)")
        next_parser.add_argument(
            "--jsonl", action="store_true", help='read {"expr","tz","start"} lines from stdin'
        )
        next_parser.add_argument(
            "--calendar", default="", help="a country code (CN, US-CA) or a custom calendar"
        )
        next_parser.add_argument(
            "--rule", default="working_days", help=f"with --calendar: one of {', '.join(RULES)}"
        )
        next_parser.add_argument("--name", default="", help="the job's name: the seed H reads")
        next_parser.add_argument("--jitter", default="0", help="seconds of jitter (0-3600), as the job's")

    def handle(self, *args, **options):
        if options["subcommand"] == "next":
            if options["jsonl"]:
                self.next_jsonl(options.get("stdin") or sys.stdin)
            else:
                self.next_once(options)

    def fail(self, exc: CronError):
        self.stderr.write(f"error {exc.code}: {exc.message}", style_func=lambda text: text)
        sys.exit(1)

    def next_once(self, options):
        try:
            if not options["expression"]:
                raise CronError(MALFORMED, 'Give an expression, e.g. cron next "0 30 3 * * ?"')
            count = parse_count(options["count"])
            after = parse_instant(options["after"], "--after") if options["after"] else django_timezone.now()
            if options["calendar"] or options["name"] or options["jitter"] != "0":
                lines = calendar_lines(
                    options["expression"],
                    options["tz"],
                    after,
                    count,
                    days=preview_days(options["calendar"], options["rule"]),
                    seed=options["name"],
                    jitter=parse_jitter(options["jitter"]),
                )
            else:
                lines = next_times(options["expression"], options["tz"], after, count)
        except (CronError, CalendarError) as exc:
            self.fail(exc)
        except DatabaseError:
            self.fail(
                CronError(MALFORMED, "A custom calendar needs the database: run manage.py migrate first")
            )
        except (ValueError, OverflowError) as exc:
            self.fail(CronError(MALFORMED, str(exc)))
        for line in lines:
            self.stdout.write(line)

    def next_jsonl(self, stream):
        out = self.stdout
        for line in stream:
            line = line.rstrip("\r\n")
            out.write(json.dumps(jsonl_result(line), separators=(",", ":")))
        out.flush()
