"""The audit page on PostgreSQL (a real server, tests/fixtures/postgres.py),
driven through `manage.py shell` in a process of its own: sign-ins are
recorded, the cursor pages cover every row once (rows share instants), and
the time filters and unreadable input answer, never a 500."""

import json
import textwrap

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    import json, re
    from datetime import UTC, datetime, timedelta
    from django.contrib.auth import get_user_model
    from django.test import Client
    from jobs.models import AuditEvent

    from jobs.models import RoleGrant
    RoleGrant.objects.create(user=get_user_model().objects.create_user("staff", password="pw-staff-123", is_staff=True), role="admin")
    client = Client()
    client.post("/login/", {"username": "staff", "password": "wrong-password-42"})
    client.post("/login/", {"username": "staff", "password": "pw-staff-123"})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    AuditEvent.objects.bulk_create(
        AuditEvent(job_name="bulk", action="edit", username="someone", created_at=start + timedelta(seconds=i // 2))
        for i in range(301)
    )

    def ids(html):
        return re.findall(r'<tr id="audit-([0-9]+)"', html)

    seen, url, pages = [], "/audit/?user=someone", 0
    while url:
        html = client.get(url).content.decode()
        pages += 1
        seen += ids(html)
        found = re.search(r'href="[?]([^"]+)"', html)
        url = "/audit/?" + found.group(1).replace("&amp;", "&") if found else ""
    window = client.get("/audit/?user=someone&since=2026-01-01 00:01&until=2026-01-01 00:01:10").content.decode()
    print(json.dumps({
        "pages": pages, "seen": len(seen), "distinct": len(set(seen)),
        "sign_ins": sorted(AuditEvent.objects.filter(subject="sign-in").values_list("action", "via")),
        "password_stored": "wrong-password-42" in json.dumps(list(AuditEvent.objects.values()), default=str),
        "window": len(ids(window)),
        "bad": [client.get(q).status_code for q in (
            "/audit/?since=2026-02-30", "/audit/?until=99999-01-01", "/audit/?before=1.1&via=x", "/audit/?since=9999-12-31",
        )],
    }))
    """
)


def test_the_audit_page_on_postgresql(postgres_site):
    site = postgres_site("audit_pg", ALLOWED_HOSTS="testserver")
    result = json.loads(site.django(SCRIPT, timeout=180).strip().splitlines()[-1])
    assert (result["pages"], result["seen"], result["distinct"]) == (7, 301, 301)
    assert result["sign_ins"] == [["sign-in", "console"], ["sign-in-failed", "console"]]
    assert result["password_stored"] is False
    # Seconds 60 to 69 (since inclusive, until exclusive), two rows each.
    assert result["window"] == 20
    assert result["bad"] == [200, 200, 200, 200]
