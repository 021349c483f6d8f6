"""Imported once by multiprocessing's fork server before it forks run
processes (jobs.engine.execution.child): Django is imported and set up
here, so a child forked from the server starts ready in milliseconds
instead of importing it all again. Nothing here opens a database
connection."""

import django

django.setup()

# The child's code, imported once too.
from jobs.engine.execution import child, pool  # noqa: E402,F401
