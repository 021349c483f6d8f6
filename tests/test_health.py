def test_healthz_answers_without_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_refuses_post(client, db):
    assert client.post("/healthz").status_code == 405


def test_healthz_answers_whatever_the_host_header(client, db, settings):
    settings.ALLOWED_HOSTS = ["cron.example.com"]
    assert client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    assert client.get("/jobs/", HTTP_HOST="127.0.0.1:8000").status_code == 400
