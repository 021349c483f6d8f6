"""The logging configuration every process uses (config/settings.py's
LOGGING; gunicorn.conf.py gives gunicorn's own loggers the same handler).

CRONBOARD_LOG_FORMAT=plain (the default) writes lines for people; json
writes one JSON object per line, for Loki or Elasticsearch: time (ISO 8601,
UTC), level, logger, message, and the context fields of
jobs.core.logcontext (request_id, worker_id, job_id, job_name, run_id,
fire_time) when the line has them; a traceback comes as exc_info. The JSON
is python-json-logger's formatter: it already turns a record's extra fields,
exceptions and non-JSON values into one line, which a formatter of our own
would have to do again. No Django here: gunicorn's master reads it before
Django is set up.
"""

FORMATS = ("plain", "json")

FORMATTERS = {
    "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    "json": {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": "%(levelname)s %(name)s %(message)s",
        "rename_fields": {"levelname": "level", "name": "logger"},
        "timestamp": "time",
        "json_ensure_ascii": False,
    },
}


def log_format(raw: str | None) -> str:
    """CRONBOARD_LOG_FORMAT's value; a ValueError names what is allowed."""
    value = (raw or "plain").strip().lower()
    if value not in FORMATS:
        raise ValueError(f"must be plain or json, got {raw!r}")
    return value


def handler(fmt: str) -> dict:
    return {
        "class": "logging.StreamHandler",
        "formatter": fmt,
        "filters": ["context"],
    }


def base_config(fmt: str) -> dict:
    """The formatter, the context filter and one handler on stderr, named console."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {fmt: FORMATTERS[fmt]},
        "filters": {"context": {"()": "jobs.core.logcontext.ContextFilter"}},
        "handlers": {"console": handler(fmt)},
    }


def gunicorn_config(fmt: str) -> dict:
    """gunicorn's logconfig_dict: its error and access logs through the same
    handler as the application's lines."""
    config = base_config(fmt)
    config["loggers"] = {
        name: {"handlers": ["console"], "level": "INFO", "propagate": False}
        for name in ("gunicorn.error", "gunicorn.access")
    }
    config["root"] = {"handlers": ["console"], "level": "INFO"}
    return config
