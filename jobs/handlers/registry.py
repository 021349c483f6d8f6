"""The handler registry: a name → class map filled by @register.

Modules that register handlers are imported at start-up: `jobs.handlers.demo`
and `jobs.handlers.builtin` always, plus those named in the
JOBS_HANDLER_MODULES setting.
"""

import importlib
from dataclasses import dataclass

from django.conf import settings

_REGISTRY: dict[str, type] = {}

BUILTIN_MODULES = ["jobs.handlers.builtin", "jobs.handlers.demo"]


class UnknownHandler(LookupError):
    pass


@dataclass(frozen=True)
class HandlerInfo:
    name: str
    label: str
    description: str
    properties_help: dict
    task: bool = False


def register(name: str, *, task: bool = False):
    """Class decorator: `@register("reports.daily")`.

    `task=True` marks a task handler: one that code starts when it has work
    for it (a one-off task, Run now, the API's run), not a schedule. A job
    running it needs no schedule or upstream job, so the console does not
    warn that nothing starts it."""
    if not name or not isinstance(name, str):
        raise ValueError("a handler needs a non-empty name")

    def decorator(cls):
        existing = _REGISTRY.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"handler {name!r} is already registered by {existing.__module__}.{existing.__qualname__}"
            )
        _REGISTRY[name] = cls
        cls.handler_name = name
        cls.task_handler = bool(task)
        return cls

    return decorator


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> type:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownHandler(
            f"handler {name!r} is not registered in this process "
            f"(was its module removed or left out of JOBS_HANDLER_MODULES?)"
        ) from None


def is_registered(name: str) -> bool:
    return name in _REGISTRY


def is_task(name: str) -> bool:
    """Whether `name` is a registered task handler (register(..., task=True))."""
    return bool(getattr(_REGISTRY.get(name), "task_handler", False))


def available() -> list[HandlerInfo]:
    """What the console's drop-down offers, sorted by name."""
    return [
        HandlerInfo(
            name=name,
            label=getattr(cls, "label", "") or name,
            description=getattr(cls, "description", "") or (cls.__doc__ or "").strip().split("\n")[0],
            properties_help=dict(getattr(cls, "properties_help", {}) or {}),
            task=bool(getattr(cls, "task_handler", False)),
        )
        for name, cls in sorted(_REGISTRY.items())
    ]


def autodiscover() -> None:
    for module in [*BUILTIN_MODULES, *settings.JOBS_HANDLER_MODULES]:
        importlib.import_module(module)
