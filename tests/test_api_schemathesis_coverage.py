"""Schemathesis's coverage phase, every check, against a gunicorn on SQLite:
each boundary and each kind of wrong value the document lets it derive
(tests/fixtures/schemathesis.py says what and how, and why this phase has
a file of its own)."""

import pytest

from tests.fixtures.schemathesis import COVERAGE, TIMEOUT_SECONDS, check_schemathesis, site_fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TIMEOUT_SECONDS)]

site = site_fixture("sqlite")


def test_schemathesis_coverage_finds_nothing(site, tmp_path):
    check_schemathesis(site, tmp_path, COVERAGE)
