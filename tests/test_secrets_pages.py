"""The Secrets page and the API's secrets: staff list, set and delete; a
value is never shown back (not in the page, the form, the API's answers or
the audit trail); others are refused; demo mode refuses every change."""

import pytest

from jobs import secrets
from jobs.core import crypto
from jobs.models import AuditEvent, Secret
from jobs.models.secrets import MAX_VALUE_BYTES
from tests.fixtures.api import assert_error

pytestmark = pytest.mark.django_db
VALUE = "v4lue-never-shown"


def stored_value(name):
    return crypto.decrypt(Secret.objects.get(name=name).token, purpose=crypto.SECRETS)


# -- the console -------------------------------------------------------------------


def test_staff_create_replace_and_delete_and_never_see_the_value(staff_client, staff_user):
    response = staff_client.post("/secrets/", {"name": "db.pw", "value": VALUE, "description": "reports DB"})
    assert response.status_code == 302
    assert stored_value("db.pw") == VALUE
    page = staff_client.get("/secrets/").content.decode()
    assert "db.pw" in page and "reports DB" in page and f"by {staff_user.username}" in page
    assert VALUE not in page
    # Replacing: the form names the secret, its value field stays empty.
    form = staff_client.get("/secrets/?name=db.pw").content.decode()
    assert 'type="password"' in form and VALUE not in form
    assert 'value="db.pw"' in form
    staff_client.post("/secrets/", {"name": "db.pw", "value": "second", "description": "reports DB"})
    assert stored_value("db.pw") == "second"
    assert staff_client.post("/secrets/db.pw/delete/").status_code == 302
    assert not Secret.objects.exists()
    assert staff_client.post("/secrets/db.pw/delete/").status_code == 404


def test_a_bad_form_re_renders_with_its_errors_and_without_the_value(staff_client):
    response = staff_client.post("/secrets/", {"name": "bad name", "value": VALUE})
    assert response.status_code == 200
    page = response.content.decode()
    assert "name is 1 to 100 letters, digits" in page
    assert VALUE not in page
    response = staff_client.post("/secrets/", {"name": "big", "value": "x" * (MAX_VALUE_BYTES + 1)})
    assert response.status_code == 200 and "can be at most 65536 bytes" in response.content.decode()
    assert not Secret.objects.exists()


def test_viewers_are_refused_the_page(viewer_client):
    assert viewer_client.get("/secrets/").status_code == 403
    assert viewer_client.post("/secrets/", {"name": "x", "value": "v"}).status_code == 403
    assert not Secret.objects.exists()


def test_demo_mode_refuses_changing_secrets_in_the_console(staff_client, settings):
    secrets.set_secret(name="keep", value=VALUE, via="cli")
    settings.DEMO_MODE = True
    response = staff_client.post("/secrets/", {"name": "new", "value": "v"}, follow=True)
    assert "Changing secrets is disabled in demo mode" in response.content.decode()
    staff_client.post("/secrets/keep/delete/")
    assert list(Secret.objects.values_list("name", flat=True)) == ["keep"]


# -- the API -----------------------------------------------------------------------


def test_the_api_sets_lists_and_deletes_without_answering_the_value(staff_api):
    response = staff_api.put("/api/secrets/api.token", {"value": VALUE, "description": "d"})
    assert response.status_code == 201, response.content
    assert set(response.json()) == {"name", "description", "set_at", "set_by", "namespaces"}
    assert staff_api.put("/api/secrets/api.token", {"value": "second"}).status_code == 200
    assert stored_value("api.token") == "second"
    assert Secret.objects.get().description == "d", "a description left out is kept"
    listed = staff_api.get("/api/secrets")
    assert [s["name"] for s in listed.json()["results"]] == ["api.token"]
    assert VALUE not in listed.content.decode() and "second" not in listed.content.decode()
    assert staff_api.delete("/api/secrets/api.token").status_code == 204
    assert_error(staff_api.delete("/api/secrets/api.token"), 404, "not_found")
    assert all(
        e.changes["value"] == "changed" for e in AuditEvent.objects.filter(action__startswith="secret")
    )
    assert AuditEvent.objects.filter(via="api").count() == 3


def test_the_api_refuses_bad_input_with_codes(staff_api):
    assert_error(staff_api.put("/api/secrets/bad%20name", {"value": "v"}), 400, "invalid", "name")
    assert_error(staff_api.put("/api/secrets/ok", {"value": ""}), 400)
    assert_error(staff_api.put("/api/secrets/ok", {"value": "x" * (MAX_VALUE_BYTES + 1)}), 400, "max_length")
    assert_error(staff_api.put("/api/secrets/ok", {"value": "a\u0000b"}), 400, "invalid_text")
    assert_error(staff_api.put("/api/secrets/ok", {}), 400)
    assert not Secret.objects.exists()


def test_the_api_refuses_viewers_and_demo_mode(viewer_api, staff_api, settings):
    assert_error(viewer_api.get("/api/secrets"), 403, "forbidden")
    assert_error(viewer_api.put("/api/secrets/x", {"value": "v"}), 403, "forbidden")
    settings.DEMO_MODE = True
    body = assert_error(staff_api.put("/api/secrets/x", {"value": "v"}), 403, "demo_mode")
    assert "Changing secrets is disabled in demo mode" in body["message"]
    assert not Secret.objects.exists()


def test_the_api_names_the_field_of_a_bad_description(staff_api):
    assert_error(
        staff_api.put("/api/secrets/ok", {"value": "v", "description": "a\u0000b"}),
        400,
        "invalid_text",
        "description",
    )
    assert not Secret.objects.exists()
