"""A small, real OpenID Connect provider for the tests (django-oauth-toolkit's
OIDC support), run as its own process by tests/fixtures/oidc.py. Its users,
their groups and how it misbehaves are read from a JSON state file at each
request, so a test changes them between two sign-ins without a restart."""
