from django.urls import path

from jobs import alert_views, views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="job_list"),
    path("cluster/", views.cluster, name="cluster"),
    path("alerts/", alert_views.alert_list, name="alert_list"),
    path("jobs/<int:job_id>/alerts/", alert_views.job_alerts, name="job_alerts"),
    path("settings/test-email/", alert_views.send_test_email, name="send_test_email"),
]
