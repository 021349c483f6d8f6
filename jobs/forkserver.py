"""Imported once by multiprocessing's fork server before it forks run
processes (jobs.processes): Django is imported and set up here, so a child
forked from the server starts ready in milliseconds instead of importing it
all again. Nothing here opens a database connection."""

import django

django.setup()

import jobs.processes  # noqa: E402  (the child's code, imported once too)
import jobs.workers  # noqa: E402,F401
