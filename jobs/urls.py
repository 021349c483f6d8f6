from django.urls import path

from jobs import alert_views, views

app_name = "jobs"

urlpatterns = [
    # The home page is the dashboard (issue 15); the job list is /jobs/.
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="job_list"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("profile/", views.profile, name="profile"),
    path("cluster/", views.cluster, name="cluster"),
    path("jobs/bulk/", views.job_bulk, name="job_bulk"),
    path("jobs/export.json", views.job_export, name="job_export"),
    path("jobs/import/", views.job_import, name="job_import"),
    path("jobs/new/", views.job_create, name="job_create"),
    path("jobs/<int:job_id>/", views.job_detail, name="job_detail"),
    path("jobs/<int:job_id>/edit/", views.job_edit, name="job_edit"),
    path("jobs/<int:job_id>/clone/", views.job_clone, name="job_clone"),
    path("jobs/<int:job_id>/runs/", views.job_runs, name="job_runs"),
    path("jobs/<int:job_id>/pause/", views.job_pause, name="job_pause"),
    path("jobs/<int:job_id>/resume/", views.job_resume, name="job_resume"),
    path("jobs/<int:job_id>/run/", views.job_run_now, name="job_run_now"),
    path("jobs/<int:job_id>/delete/", views.job_delete, name="job_delete"),
    path("runs/", views.run_list, name="run_list"),
    path("upcoming/", views.upcoming, name="upcoming"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/log.txt", views.run_log, name="run_log"),
    path("runs/<int:run_id>/retry/", views.run_retry, name="run_retry"),
    path("cron/preview/", views.cron_preview, name="cron_preview"),
    path("settings/", views.settings_page, name="settings"),
    path("messages/", views.message_list, name="messages"),
    path("messages/unread/", views.unread_count, name="unread_count"),
    path("messages/read/", views.message_read, name="messages_read_all"),
    path("messages/<int:message_id>/read/", views.message_read, name="message_read"),
    path("alerts/", alert_views.alert_list, name="alert_list"),
    path("jobs/<int:job_id>/alerts/", alert_views.job_alerts, name="job_alerts"),
    path("settings/test-email/", alert_views.send_test_email, name="send_test_email"),
    path("alerts/test-channel/", alert_views.send_test_channel, name="send_test_channel"),
]
