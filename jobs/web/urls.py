from django.urls import path

from jobs.web import account, alerts, audit, cluster, dashboard, job_form, job_page, jobs, runs, secrets

app_name = "jobs"

urlpatterns = [
    # The home page is the dashboard; the job list is /jobs/.
    path("", dashboard.dashboard, name="dashboard"),
    path("jobs/", jobs.job_list, name="job_list"),
    path("favicon.ico", account.favicon, name="favicon"),
    path("profile/", account.profile, name="profile"),
    path("cluster/", cluster.cluster, name="cluster"),
    path("jobs/bulk/", jobs.job_bulk, name="job_bulk"),
    path("jobs/export.json", jobs.job_export, name="job_export"),
    path("jobs/import/", jobs.job_import, name="job_import"),
    path("jobs/new/", job_form.job_create, name="job_create"),
    path("jobs/<int:job_id>/", job_page.job_detail, name="job_detail"),
    path("jobs/<int:job_id>/edit/", job_form.job_edit, name="job_edit"),
    path("jobs/<int:job_id>/clone/", job_form.job_clone, name="job_clone"),
    path("jobs/<int:job_id>/runs/", job_page.job_runs, name="job_runs"),
    path("jobs/<int:job_id>/pause/", job_page.job_pause, name="job_pause"),
    path("jobs/<int:job_id>/resume/", job_page.job_resume, name="job_resume"),
    path("jobs/<int:job_id>/mute/", job_page.job_mute, name="job_mute"),
    path("jobs/<int:job_id>/run/", job_page.job_run_now, name="job_run_now"),
    path("jobs/<int:job_id>/delete/", job_page.job_delete, name="job_delete"),
    path("runs/", runs.run_list, name="run_list"),
    path("upcoming/", dashboard.upcoming, name="upcoming"),
    path("runs/<int:run_id>/", runs.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/log.txt", runs.run_log, name="run_log"),
    path("runs/<int:run_id>/retry/", runs.run_retry, name="run_retry"),
    path("cron/preview/", job_form.cron_preview, name="cron_preview"),
    path("settings/", account.settings_page, name="settings"),
    path("audit/", audit.audit_list, name="audit"),
    path("secrets/", secrets.secret_list, name="secret_list"),
    path("secrets/move/", secrets.secret_move, name="secret_move"),
    path("secrets/move/candidates/", secrets.secret_candidates, name="secret_candidates"),
    path("secrets/<str:name>/delete/", secrets.secret_delete, name="secret_delete"),
    path("messages/", account.message_list, name="messages"),
    path("messages/unread/", account.unread_count, name="unread_count"),
    path("messages/read/", account.message_read, name="messages_read_all"),
    path("messages/<int:message_id>/read/", account.message_read, name="message_read"),
    path("alerts/", alerts.alert_list, name="alert_list"),
    path("jobs/<int:job_id>/alerts/", alerts.job_alerts, name="job_alerts"),
    path("settings/test-email/", alerts.send_test_email, name="send_test_email"),
    path("alerts/test-channel/", alerts.send_test_channel, name="send_test_channel"),
]
