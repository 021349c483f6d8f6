def test_healthz_answers_without_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_refuses_post(client, db):
    assert client.post("/healthz").status_code == 405
