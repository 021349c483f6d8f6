"""Schemathesis's generated phases (examples, fuzzing, stateful), every
check, against a gunicorn on SQLite and the document it serves; its coverage
phase is tests/test_api_schemathesis_coverage.py (tests/fixtures/schemathesis.py
says what and how)."""

import pytest

from tests.fixtures.schemathesis import TIMEOUT_SECONDS, check_schemathesis, site_fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TIMEOUT_SECONDS)]

site = site_fixture("sqlite")


def test_schemathesis_finds_nothing_and_reaches_the_job_life_cycle(site, tmp_path):
    check_schemathesis(site, tmp_path)
