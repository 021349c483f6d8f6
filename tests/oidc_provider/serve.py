"""Start the test provider: `python -m tests.oidc_provider.serve PORT` with
the environment settings.py names. Makes its database, two RSA keys (the
signing key, and one the JWKS never shows) and the client from the state
file's "client", then serves on 127.0.0.1:PORT until killed."""

import os
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _write_key(path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.write_bytes(pem)


def main(port: int) -> None:
    workdir = Path(os.environ["OIDC_PROVIDER_DIR"])
    for name in ("signing-key.pem", "other-key.pem"):
        if not (workdir / name).exists():
            _write_key(workdir / name)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    from tests.oidc_provider.misbehave import state

    call_command("migrate", verbosity=0)
    client = state()["client"]
    Application.objects.update_or_create(
        client_id=client["id"],
        defaults={
            "name": "Cronboard",
            "client_secret": client["secret"],
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "algorithm": Application.RS256_ALGORITHM,
            "skip_authorization": True,
            "redirect_uris": " ".join(state()["redirect_uris"]),
            "post_logout_redirect_uris": " ".join(client.get("post_logout_redirect_uris", [])),
        },
    )
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
