# TEMPORARY LOCAL SHIM - replaced by the cron branch; never committed.
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from datetime import timezone as dt_tz
from croniter import croniter


class CronError(ValueError):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def get_zone(name):
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise CronError(47006, f"unknown time zone {name!r}")


def normalize(expr):
    f = expr.split()
    if len(f) == 5:
        f = ["0"] + f
    if len(f) != 6:
        raise CronError(47001, "need 6 fields")
    return " ".join(f)


class CronSchedule:
    def __init__(self, expr):
        self.expression = normalize(expr)
        f = self.expression.split()
        self._c = " ".join(f[1:] + [f[0]])
        if not croniter.is_valid(self._c):
            raise CronError(47001, "bad")
        self.is_interval_based = True

    def next_after(self, after, tz):
        if isinstance(tz, str):
            tz = get_zone(tz)
        return croniter(self._c, after.astimezone(tz)).get_next(object).astimezone(dt_tz.utc) if False else croniter(self._c, after.astimezone(tz)).get_next(__import__("datetime").datetime).astimezone(dt_tz.utc)

    def next_n(self, after, tz, n):
        out = []
        for _ in range(n):
            after = self.next_after(after, tz)
            out.append(after)
        return out


@lru_cache(maxsize=1024)
def parse(expr):
    return CronSchedule(expr)


def validate_interval(seconds):
    if int(seconds) < 5:
        raise CronError(47004, "interval below 5 s")
    return int(seconds)
