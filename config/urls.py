from django.contrib import admin
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog

from jobs.web import signin
from jobs.web.i18n import set_language

urlpatterns = [
    path("login/", signin.SignInView.as_view(), name="login"),
    path("logout/", signin.LogoutView.as_view(), name="logout"),
    path("oidc/authenticate/", signin.oidc_start, name="oidc_start"),
    path("oidc/callback/", signin.oidc_callback, name="oidc_callback"),
    path("i18n/setlang/", set_language, name="set_language"),
    # The console's scripts read their strings from here (djangojs catalog): a
    # plain same-origin <script src>, which the CSP allows.
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("admin/", admin.site.urls),
    path("api/", include("jobs.api.urls")),
    path("", include("jobs.web.urls")),
]
