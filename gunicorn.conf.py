"""gunicorn settings read from the working directory (the Dockerfile's
WORKDIR, scripts/run.sh's repository root): the command lines there set
only what differs per deployment (bind, workers).

limit_request_line: gunicorn's default (4094 bytes) answers a longer
request line itself, as an HTML error. 8190 is the most gunicorn allows;
the API refuses URLs longer than jobs.api.framework.MAX_URL_CHARS (4096) as JSON
(414, code uri_too_long), so every over-long URL a client can send under
/api/ up to that size gets a JSON answer. Longer request lines still get
gunicorn's own error (docs/api.md).

control_socket_disable: gunicorn 27 otherwise opens a control socket at
~/.gunicorn/gunicorn.ctl, one path shared by every gunicorn of the user, so
two of them (a second checkout, the tests' server) remove each other's.
Nothing here uses the control interface (gunicornc)."""

import os
import shutil
import tempfile

from config.logs import gunicorn_config, log_format

limit_request_line = 8190
control_socket_disable = True


# Request metrics from every worker, added up at /metrics (jobs.web.metrics):
# prometheus-client's multiprocess mode keeps each worker's counts in files
# of PROMETHEUS_MULTIPROC_DIR. Set here, in the master, before any worker
# imports the client, to a new directory of this server's own (under TMPDIR),
# removed when it exits: one shared with another server, or with a
# scheduler started with the same environment, would add their counts to
# this one's, and files left from a server before would too.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="cronboard-metrics-")


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


# CRONBOARD_LOG_FORMAT=json: gunicorn's own lines (its error log, and the
# access log when --access-logfile is given) as JSON too.
if log_format(os.environ.get("CRONBOARD_LOG_FORMAT")) == "json":
    logconfig_dict = gunicorn_config("json")
