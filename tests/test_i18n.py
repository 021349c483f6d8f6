"""The console in English (the default) and Simplified Chinese: where the
language comes from, the switcher, the JavaScript catalog."""

import pytest

from jobs.models import Profile


@pytest.mark.django_db
def test_english_is_the_default(staff_client):
    response = staff_client.get("/jobs/")
    assert response.status_code == 200
    assert '<html lang="en">' in response.content.decode()


@pytest.mark.django_db
def test_accept_language_zh_cn_gives_simplified_chinese(staff_client):
    response = staff_client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    assert '<html lang="zh-hans">' in response.content.decode()
    assert response["Content-Language"] == "zh-hans"


@pytest.mark.django_db
def test_the_saved_choice_beats_the_browser(staff_client, staff_user):
    Profile.objects.create(user=staff_user, language="en")
    response = staff_client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert '<html lang="en">' in response.content.decode()


@pytest.mark.django_db
def test_the_switcher_saves_the_choice_on_the_profile_and_goes_back(staff_client, staff_user):
    response = staff_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/runs/"})
    assert response.status_code == 302 and response["Location"] == "/runs/"
    assert Profile.objects.get(user=staff_user).language == "zh-hans"
    staff_client.cookies.clear()  # the profile, not the cookie, carries it to the next session
    staff_client.force_login(staff_user)
    assert '<html lang="zh-hans">' in staff_client.get("/runs/").content.decode()


@pytest.mark.django_db
def test_the_switcher_works_before_sign_in_with_a_cookie(client):
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 302
    assert '<html lang="zh-hans">' in client.get("/login/").content.decode()


@pytest.mark.django_db
def test_the_switcher_refuses_an_unknown_language(staff_client, staff_user):
    response = staff_client.post("/i18n/setlang/", {"language": "xx", "next": "/jobs/"})
    assert response.status_code == 400
    assert not Profile.objects.filter(user=staff_user).exists()


@pytest.mark.django_db
def test_the_switcher_is_a_form_in_the_header(staff_client):
    html = staff_client.get("/jobs/").content.decode()
    assert 'action="/i18n/setlang/"' in html
    assert '<option value="zh-hans" lang="zh-hans">简体中文</option>' in html


@pytest.mark.django_db
def test_the_javascript_catalog_is_served_locally_in_the_active_language(client):
    response = client.get("/jsi18n/", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    body = response.content.decode()
    assert "django.gettext" in body
