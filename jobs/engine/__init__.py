"""The scheduler engine, in parts that communicate by arguments and return
values (docs/architecture.md, "The engine"):

- `loop`: the `Scheduler`, sequencing the steps, its sleep, drain, signals;
- `planning`: due fires, misfire and overlap, the compare-and-set claim;
- `execution`: starting runs, and the executors that run handlers (child
  processes or threads, their fork server, the capped log buffer);
- `outcomes`: recording how runs ended, retries, crashes and their alerts,
  downstream runs, deadlines and cancels;
- `maintenance`: recovery at start, the sweep, requeueing unconfirmed claims,
  run heartbeats, the retention core;
- `leadership` and `leases`: the leader and node leases, the worker id's
  identity, the PostgreSQL session;
- `outbox`: delivering alerts from one sender thread, paced by itself;
- `listener` (PostgreSQL `LISTEN` wake-ups), `heartbeat_ping` (the outgoing
  heartbeat), `bulk` (one UPDATE for many rows).

Nothing is imported here.
"""
