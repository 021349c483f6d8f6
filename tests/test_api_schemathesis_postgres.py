"""Schemathesis's generated phases (examples, fuzzing, stateful), every
check, against a gunicorn on PostgreSQL, whose text refuses what SQLite
stores (a NUL, a lone surrogate); tests/fixtures/schemathesis.py says what
and how, and why the coverage phase runs on SQLite only."""

import pytest

from tests.fixtures.schemathesis import TIMEOUT_SECONDS, check_schemathesis, site_fixture

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(TIMEOUT_SECONDS)]

site = site_fixture("postgres")


def test_schemathesis_finds_nothing_and_reaches_the_job_life_cycle(site, tmp_path):
    check_schemathesis(site, tmp_path)
