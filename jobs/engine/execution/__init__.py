"""Execution: claiming queued runs and running handlers so that the
scheduler loop never waits on one (docs/architecture.md maps the modules;
`pool` is the interface every executor has).

Nothing is imported here: a run's child process imports `child` before
Django is set up, and importing this package must not set Django up either.
"""
