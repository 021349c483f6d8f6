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

limit_request_line = 8190
control_socket_disable = True
