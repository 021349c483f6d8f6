"""The console: server-rendered pages with htmx, one module per group of
pages, with the console's URLs, middleware and template tags. Views are
thin — read the request, call a form or a service, render. htmx requests
get the partial (`page.html#dom-id`) they target; everything else gets the
whole page.

Access is decided by jobs.access only: every view needs a signed-in user;
mutations need `can_edit` and POST (a GET never changes anything)."""
