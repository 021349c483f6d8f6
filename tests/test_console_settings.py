"""The settings page (config centre) and the messages page."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from jobs.config import get_setting
from jobs.models import Message, Setting

HTMX = {"HX-Request": "true"}

pytestmark = pytest.mark.django_db


def test_settings_show_current_values(staff_client):
    html = staff_client.get(reverse("jobs:settings")).content.decode()
    assert 'name="sys.job.logRetentionDays"' in html and 'value="30"' in html
    assert "Save settings" in html


def test_viewer_sees_settings_read_only(viewer_client):
    html = viewer_client.get(reverse("jobs:settings")).content.decode()
    assert "disabled" in html and "Save settings" not in html


def test_staff_saves_valid_settings(staff_client, staff_user):
    response = staff_client.post(
        reverse("jobs:settings"),
        {"sys.job.logRetentionDays": "7", "sys.job.alertEmails": "a@example.com; b@example.com"},
    )
    assert response.status_code == 302
    assert get_setting("sys.job.logRetentionDays") == 7
    assert get_setting("sys.job.alertEmails") == ["a@example.com", "b@example.com"]
    assert Setting.objects.get(key="sys.job.logRetentionDays").updated_by == staff_user


@pytest.mark.parametrize(
    ("days", "emails", "message"),
    [
        ("0", "", "Keep run history between 1 and 3650 days."),
        ("lots", "", "Enter a whole number of days."),
        ("", "", "Enter a whole number of days."),
        ("7", "ops@example.com, nope", "“nope” is not a valid email address."),
    ],
)
def test_invalid_settings_rerender_and_save_nothing(staff_client, days, emails, message):
    before = list(Setting.objects.order_by("key").values_list("key", "value", "updated_at"))
    response = staff_client.post(
        reverse("jobs:settings"),
        {"sys.job.logRetentionDays": days, "sys.job.alertEmails": emails},
        headers={**HTMX, "HX-Target": "settings-form"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert message in html and "Nothing was saved" in html
    assert list(Setting.objects.order_by("key").values_list("key", "value", "updated_at")) == before


def test_unread_count_in_the_header(viewer_client, viewer_user, superuser):
    Message.objects.create(user=viewer_user, subject="job crashed")
    Message.objects.create(user=viewer_user, subject="old", read_at=timezone.now())
    Message.objects.create(user=superuser, subject="not yours")
    html = viewer_client.get(reverse("jobs:job_list")).content.decode()
    assert '<span class="count" title="1 unread">1<span class="visually-hidden"> unread</span></span>' in html


def test_messages_page_lists_only_mine_escaped(viewer_client, viewer_user, superuser):
    Message.objects.create(user=viewer_user, subject="<b>crash</b>", body='<img src=x onerror="alert(1)">')
    Message.objects.create(user=superuser, subject="secret")
    html = viewer_client.get(reverse("jobs:messages")).content.decode()
    assert "&lt;b&gt;crash&lt;/b&gt;" in html and "<img" not in html
    assert "secret" not in html


def test_mark_read_updates_list_and_count(viewer_client, viewer_user):
    first = Message.objects.create(user=viewer_user, subject="one")
    Message.objects.create(user=viewer_user, subject="two")
    response = viewer_client.post(
        reverse("jobs:message_read", args=[first.pk]), headers={**HTMX, "HX-Target": "message-list"}
    )
    html = response.content.decode()
    assert response.status_code == 200 and 'id="message-list"' in html
    assert 'id="unread-count" href="/messages/" hx-swap-oob="true"' in html and 'title="1 unread"' in html
    first.refresh_from_db()
    assert first.read_at is not None
    viewer_client.post(reverse("jobs:messages_read_all"))
    assert not Message.objects.filter(user=viewer_user, read_at__isnull=True).exists()


def test_cannot_mark_someone_elses_message(viewer_client, superuser):
    theirs = Message.objects.create(user=superuser, subject="x")
    assert viewer_client.post(reverse("jobs:message_read", args=[theirs.pk])).status_code == 404
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_inactive_user_is_signed_out(client):
    user = get_user_model().objects.create_user("gone", password="pw-gone-123", is_active=False)
    client.force_login(user)
    assert client.get(reverse("jobs:job_list")).status_code == 302


def test_kinds_of_alert_are_ticked_and_the_alert_language_chosen_not_typed(staff_client):
    html = staff_client.get(reverse("jobs:settings")).content.decode()
    assert 'type="checkbox" name="sys.job.alertOn" value="long_running"' in html
    assert 'type="checkbox" name="sys.job.alertOn" value="crashed"' in html and "checked" in html
    assert '<select name="sys.ui.language"' in html and '<option value="zh-hans"' in html
    assert 'type="text" name="sys.job.alertOn"' not in html
    response = staff_client.post(
        reverse("jobs:settings"),
        {
            "sys.job.logRetentionDays": "30",
            "sys.job.alertOn": ["late", "crashed"],
            "sys.ui.language": "zh-hans",
        },
    )
    assert response.status_code == 302
    assert get_setting("sys.job.alertOn") == ["crashed", "late"]
    assert get_setting("sys.ui.language") == "zh-hans"
    html = staff_client.get(reverse("jobs:settings")).content.decode()
    assert '<option value="zh-hans" selected>' in html


def test_alerts_and_messages_are_one_area_with_two_tabs(viewer_client, viewer_user):
    html = viewer_client.get(reverse("jobs:alert_list")).content.decode()
    # The top bar (the Alerts link sits outside the folding menu, for phones).
    nav = html.split('<header class="topbar">', 1)[1].split("</header>", 1)[0]
    assert nav.count(">Alerts") == 1 and "Messages" not in nav
    assert 'id="unread-count" href="/alerts/"' in nav
    tabs = html.split('<nav class="tabs"', 1)[1].split("</nav>", 1)[0]
    assert '<a href="/alerts/" aria-current="page">Sent alerts</a>' in tabs and 'href="/messages/"' in tabs
    Message.objects.create(user=viewer_user, subject="s", body="b")
    html = viewer_client.get(reverse("jobs:messages")).content.decode()
    tabs = html.split('<nav class="tabs"', 1)[1].split("</nav>", 1)[0]
    assert '<a href="/messages/" aria-current="page">Messages <span class="count">1' in tabs
    # While a message is unread, the area's link leads to it.
    assert 'id="unread-count" href="/messages/"' in html


def test_unticking_every_box_of_a_setting_saves_none_and_a_key_not_sent_keeps_its_value(staff_client):
    """Browsers send nothing for boxes left unticked: the page names the keys
    it shows (sent_keys), so all boxes unticked is "none", while a key a
    post does not name at all (an old page, a script) keeps its value."""
    from jobs.config import get_setting

    staff_client.post(
        reverse("jobs:settings"), {"sys.job.alertOn": ["crashed", "failed"], "sent_keys": ["sys.job.alertOn"]}
    )
    assert get_setting("sys.job.alertOn") == ["crashed", "failed"]
    staff_client.post(reverse("jobs:settings"), {"sys.job.logRetentionDays": "9"})
    assert get_setting("sys.job.alertOn") == ["crashed", "failed"], "not sent: kept"
    response = staff_client.post(reverse("jobs:settings"), {"sent_keys": ["sys.job.alertOn"]})
    assert response.status_code == 302
    assert get_setting("sys.job.alertOn") == []
    page = staff_client.get(reverse("jobs:settings")).content.decode()
    assert 'name="sent_keys" value="sys.job.alertOn"' in page
