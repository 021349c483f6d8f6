"""The shapes of the API's requests and answers, declared once as ninja
(pydantic) schemas: `jobs` (a job, its filters, run now), `runs` (a
run, its filters, a one-off task) and `overview` (handlers, the dashboard,
upcoming fires, the cron preview). django-ninja builds the OpenAPI document
at /api/schema from these and from the operations of jobs/api/, and the
same schemas check each request's shape before a view sees it, so the
document cannot say one thing while the code does another.

Shape only: types, required fields, lengths, enums, minima and maxima, each
taken from where the rule lives (the model, the cron module, the job form,
the alert settings, the channel module). Whether a value makes sense (a cron
expression parses, a handler exists, a zone is real, a name is free) is
decided by the job form and the cron module, as for the console and
`jobs import`. A schema may give a shape error its own code
(PydanticCustomError) where the job form or the cron module has one for it.

Answers are built by jobs/serializers.py; tests/test_api_schema.py and the
Schemathesis run (tests/test_api_schemathesis.py) check they fit these."""
