"""The job form's "Move to a secret": POST secrets/move/ stores a credential
typed in clear as a secret and answers the reference, never the value; the
list of credentials typed in clear names them without their values."""

import pytest

from jobs.core import crypto
from jobs.models import Secret

pytestmark = pytest.mark.django_db
VALUE = "Bearer t0ken-never-sent-back"


def stored_value(name):
    return crypto.decrypt(Secret.objects.get(name=name).token, purpose=crypto.SECRETS)


def test_move_stores_the_value_and_answers_the_reference_only(staff_client):
    response = staff_client.post("/secrets/move/", {"name": "orders.Authorization", "value": VALUE})
    assert response.status_code == 200
    assert response.json() == {
        "name": "orders.Authorization",
        "reference": "{{ secret.orders.Authorization }}",
    }
    assert VALUE not in response.content.decode()
    assert stored_value("orders.Authorization") == VALUE


def test_an_existing_name_is_replaced_only_when_confirmed(staff_client):
    staff_client.post("/secrets/move/", {"name": "api.key", "value": "first"})
    response = staff_client.post("/secrets/move/", {"name": "api.key", "value": "second"})
    assert response.status_code == 409
    assert response.json()["code"] == "secret_exists" and "api.key" in response.json()["message"]
    assert stored_value("api.key") == "first"
    response = staff_client.post("/secrets/move/", {"name": "api.key", "value": "second", "replace": "1"})
    assert response.status_code == 200
    assert stored_value("api.key") == "second"


def test_a_bad_name_is_refused_with_the_stores_message(staff_client):
    response = staff_client.post("/secrets/move/", {"name": "no spaces/here", "value": VALUE})
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid",
        "message": "A secret's name is 1 to 100 letters, digits, “_”, “.” or “-”.",
    }
    response = staff_client.post("/secrets/move/", {"name": "ok", "value": ""})
    assert response.status_code == 400 and response.json()["code"] == "required"
    assert not Secret.objects.exists()


def test_demo_mode_refuses_with_the_demo_sentence(staff_client, settings):
    settings.DEMO_MODE = True
    response = staff_client.post("/secrets/move/", {"name": "api.key", "value": VALUE})
    assert response.status_code == 403
    assert response.json()["code"] == "demo_mode"
    assert "Changing secrets is disabled in demo mode" in response.json()["message"]
    assert not Secret.objects.exists()


def test_users_without_edit_rights_are_refused(viewer_client, client):
    assert viewer_client.post("/secrets/move/", {"name": "api.key", "value": VALUE}).status_code == 403
    assert viewer_client.post("/secrets/move/candidates/", {"kind": "http"}).status_code == 403
    client.logout()
    assert client.post("/secrets/move/", {"name": "api.key", "value": VALUE}).status_code == 302
    assert not Secret.objects.exists()


def test_get_is_not_allowed(staff_client):
    assert staff_client.get("/secrets/move/").status_code == 405


def test_candidates_name_credentials_typed_in_clear_but_not_their_values(staff_client):
    data = {
        "kind": "http",
        "name": "nightly orders",
        "headers": f"Authorization: {VALUE}\nAccept: text/plain\nX-Api-Key: {{{{ secret.k }}}}",
        "properties": '{"db_password": "hunter2-typed", "region": "eu"}',
    }
    page = staff_client.post("/secrets/move/candidates/", data).content.decode()
    assert VALUE not in page and "hunter2-typed" not in page
    assert 'data-property="headers" data-entry="Authorization"' in page
    assert 'value="nightly_orders.Authorization"' in page
    assert 'data-property="db_password" data-entry=""' in page
    assert "X-Api-Key" not in page and "Accept" not in page and "region" not in page
    assert "?name=nightly_orders.db_password" in page


def test_the_edit_form_lists_the_jobs_credentials_typed_in_clear(staff_client):
    from tests.factories import make_job

    job = make_job(name="orders", properties={"api_token": "abc123-typed", "region": "eu"})
    page = staff_client.get(f"/jobs/{job.pk}/edit/").content.decode()
    assert 'data-property="api_token"' in page and 'value="orders.api_token"' in page


def test_the_secrets_page_fills_in_a_suggested_new_name(staff_client):
    page = staff_client.get("/secrets/?name=orders.api_token").content.decode()
    assert 'value="orders.api_token"' in page
    assert 'value="bad name"' not in staff_client.get("/secrets/?name=bad%20name").content.decode()


@pytest.mark.parametrize("field", ["properties", "headers"])
def test_candidates_of_json_nested_past_any_limit_are_none_not_a_server_error(staff_client, field):
    """The list reads what is being typed with the strict JSON reader
    (jobs.jsontext): text nested deeper than Python's recursion limit is no
    credential list, and never a 500."""
    deep = "[" * 100_000 + "]" * 100_000
    data = {"kind": "http", "name": "deep", "url": "http://127.0.0.1/"}
    data[field] = '{"Authorization": ' + deep + "}" if field == "properties" else deep
    response = staff_client.post("/secrets/move/candidates/", data)
    assert response.status_code == 200
    assert "Move to a secret" not in response.content.decode()


@pytest.mark.django_db
def test_editors_who_may_not_store_secrets_are_not_offered_the_move():
    """Moving a value stores a secret, an admin's right: an editor's form
    lists nothing to move, and the move itself is refused."""
    from django.test import Client

    from tests.fixtures.core import make_user

    editor = Client()
    editor.force_login(make_user("eddie", "editor"))
    data = {"kind": "http", "name": "feed", "headers": "Authorization: Bearer abc"}
    assert "Move to a secret" not in editor.post("/secrets/move/candidates/", data).content.decode()
    assert editor.post("/secrets/move/", {"name": "feed.Authorization", "value": "x"}).status_code == 403
