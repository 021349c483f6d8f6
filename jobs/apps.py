from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth import get_user_model, signals
        from django.db.models.signals import post_save

        from jobs import (
            audit,
            checks,  # noqa: F401  (registers them)
            roles,
            twofactor,
        )
        from jobs.handlers import registry

        registry.autodiscover()
        signals.user_logged_in.connect(audit.record_sign_in, dispatch_uid="jobs.audit.sign_in")
        signals.user_logged_in.connect(twofactor.on_sign_in, dispatch_uid="jobs.twofactor.sign_in")
        signals.user_login_failed.connect(
            audit.record_failed_sign_in, dispatch_uid="jobs.audit.sign_in_failed"
        )
        post_save.connect(
            roles.grant_default_role, sender=get_user_model(), dispatch_uid="jobs.roles.default_role"
        )
