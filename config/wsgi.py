import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

if settings.SECRET_KEY_SOURCE == "process":
    # A key drawn for this process only (config/settings.py): each gunicorn
    # worker would sign sessions with its own, and a restart would sign
    # everyone out. Serving refuses it; runserver and gunicorn both load this.
    raise ImproperlyConfigured(
        "No SECRET_KEY: set the SECRET_KEY environment variable, or run `python manage.py bootstrap` "
        f"once, which writes {settings.SECRET_KEY_FILE}."
    )

application = get_wsgi_application()
