"""The scheduler engine: steps that communicate by arguments and return
values, sequenced by `loop.Scheduler`. docs/architecture.md ("The engine")
maps its modules and the order of a pass.

Nothing is imported here.
"""
