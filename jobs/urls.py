from django.urls import path

from jobs import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="job_list"),
    path("cluster/", views.cluster, name="cluster"),
]
