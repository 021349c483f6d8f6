"""The JSON API under /api/: a router per resource (jobs, overview, runs,
tasks, preview), their shapes (schemas/), what the OpenAPI document adds
besides shapes (openapi.py), the frame every view runs in (framework.py);
urls.py puts them together."""
