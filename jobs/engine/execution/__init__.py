"""Execution: running handlers so that the scheduler loop never waits on one.

- `starting`: claim queued runs for free slots and hand each to the pool;
- `executors`: what every pool shares (`Flight`, `Outcome`, `HandlerRef`,
  `run_handler`) and `make_pool`, which picks one by JOBS_EXECUTOR;
- `processes`: the process executor (the default), a child process per slot;
- `forkserver`: what the children's fork server imports once, before forking;
- `threads`: the thread executor;
- `logbuffer`: a run's log as the scheduler holds it, the capped head and tail.

Nothing is imported here: `logbuffer` is used by jobs.models and by the
children before Django is set up.
"""
