"""Execution: claiming queued runs and running handlers so that the
scheduler loop never waits on one (docs/architecture.md maps the modules;
`pool` is the interface every executor has).

Nothing is imported here: `logbuffer` is used by jobs.models and by the
children before Django is set up.
"""
