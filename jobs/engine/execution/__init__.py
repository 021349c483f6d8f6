"""Execution: running handlers so that the scheduler loop never waits on one.

- `starting`: claim queued runs for free slots and hand each to the pool;
- `pool`: the interface every executor has (`Pool`) and what they share
  (`Flight`, `Outcome`, `HandlerRef`, `run_handler`);
- `executors`: `make_pool`, which picks one by JOBS_EXECUTOR;
- `processes`: the process executor (the default), a child process per slot;
- `child`: what such a child process runs, and the payload a run travels in;
- `forkserver`: what the children's fork server imports once, before forking;
- `threads`: the thread executor;
- `logbuffer`: a run's log as the scheduler holds it, the capped head and tail.

Nothing is imported here: `logbuffer` is used by jobs.models and by the
children before Django is set up.
"""
