from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from jobs import checks  # noqa: F401  (registers them)
        from jobs.handlers import registry

        registry.autodiscover()
