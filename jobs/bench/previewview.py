"""`bench preview --view`: the cron editor's live preview as the console
serves it (GET /cron/preview/, the whole request through Django's stack),
with and without a working-day calendar, on the throw-away database. Each
expression is asked in turns (plain, calendar, plain, …), so both see the
same machine; the figure is the median wall time of a request."""

import logging
import statistics
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from jobs.bench.report import fmt, table

# What the editor shows most: daily and weekday jobs, and a busy one.
CASES = [
    ("0 0 9 * * ?", "Asia/Shanghai"),
    ("0 30 8 ? * MON-FRI", "Asia/Shanghai"),
    ("0 */15 * * * ?", "Asia/Shanghai"),
    ("0 0 18 L * ?", "Europe/Berlin"),
    ("0 H 2 * * ?", "America/New_York"),
]
CALENDAR = "CN"


def run(options: dict) -> dict:
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw-123")
    host = next(
        (h for h in settings.ALLOWED_HOSTS if h not in ("*", "") and not h.startswith(".")), "localhost"
    )
    client = Client(HTTP_HOST=host)
    logging.getLogger("axes").setLevel(logging.WARNING)
    client.force_login(user)
    url = reverse("jobs:cron_preview")

    def ask(expression: str, zone: str, calendar: str) -> float:
        query = {"cron_expression": expression, "timezone": zone, "name": "bench", "calendar": calendar}
        started = time.perf_counter()
        response = client.get(url, query)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or b'id="cron-times"' not in response.content:
            raise SystemExit(f"{expression}: the preview answered {response.status_code} without fire times")
        return elapsed

    rows = []
    for expression, zone in CASES:
        for calendar in ("", CALENDAR, "", CALENDAR):  # warm: templates, the calendar's year tables
            ask(expression, zone, calendar)
        plain, with_calendar = [], []
        for _ in range(options["repeat"]):
            plain.append(ask(expression, zone, ""))
            with_calendar.append(ask(expression, zone, CALENDAR))
        rows.append(
            {
                "expression": expression,
                "zone": zone,
                "plain_ms": round(statistics.median(plain), 2),
                "calendar_ms": round(statistics.median(with_calendar), 2),
            }
        )
    plain_total = sum(r["plain_ms"] for r in rows)
    calendar_total = sum(r["calendar_ms"] for r in rows)
    return {"calendar": CALENDAR, "rows": rows, "ratio": round(calendar_total / plain_total, 2)}


def render(figures: dict) -> str:
    body = [
        (
            r["expression"],
            r["zone"],
            fmt(r["plain_ms"]),
            fmt(r["calendar_ms"]),
            fmt(round(r["calendar_ms"] / r["plain_ms"], 2)),
        )
        for r in figures["rows"]
    ]
    return (
        f"bench preview --view: GET /cron/preview/, median ms per request, without and with "
        f"{figures['calendar']} working_days\n"
        + table(body, ["expression", "zone", "plain", figures["calendar"], "×plain"])
        + f"\nsum of medians with the calendar / without: ×{fmt(figures['ratio'])}"
    )
