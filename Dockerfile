# Cronboard: one image, two processes. The default command serves the console;
# run the scheduler from the same image with `python manage.py runscheduler`.
# The base is pinned to a patch release; raise it deliberately.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CRONBOARD_REQUIRE_SECRET_KEY=true

WORKDIR /app
COPY requirements.txt requirements-ldap.txt ./
# python-ldap (LDAP sign-in) is built against OpenLDAP's and SASL's headers;
# the compiler and headers go again, the libraries it links stay.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libldap2-dev libsasl2-dev \
        libldap-2.5-0 libsasl2-2 \
    && apt-mark manual libldap-2.5-0 libsasl2-2 \
    && pip install -r requirements.txt -r requirements-ldap.txt \
    && apt-get purge -y --auto-remove gcc libc6-dev libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*

COPY . .
# Static files are collected and the translation catalogs compiled (polib:
# no msgfmt in the image) at build time; the key here only satisfies the
# settings module during the build and is never used at run time.
RUN SECRET_KEY=collectstatic-only DATABASE_URL=sqlite:////tmp/build.sqlite3 \
        python manage.py collectstatic --noinput --verbosity 0 \
    && SECRET_KEY=collectstatic-only DATABASE_URL=sqlite:////tmp/build.sqlite3 \
        python manage.py compilecatalogs --verbosity 0 \
    && rm -f /tmp/build.sqlite3* \
    && useradd --system --uid 10001 --home-dir /app cronboard \
    && mkdir -p /app/var && chown cronboard /app/var

USER cronboard
EXPOSE 8000

# Web containers: GET /healthz on port 8000. Scheduler containers (the same
# image running `manage.py runscheduler`): `manage.py health`, which fails
# once the scheduler stops renewing its lease. See scripts/healthcheck.sh.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["sh", "scripts/healthcheck.sh"]

# gunicorn also reads gunicorn.conf.py from the WORKDIR (no control socket,
# the request-line limit).
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
