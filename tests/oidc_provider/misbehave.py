"""What the test provider reads from its state file at each request: who may
sign in (StateBackend), which groups a user's tokens carry (Validator), and
the ways it can be told to misbehave, all still on the real code path:

    "mode": "normal"         tokens as django-oauth-toolkit makes them
            "unknown-key"    the id_token signed with a key the JWKS lacks
            "expired"        an id_token whose exp has already passed
            "wrong-nonce"    an id_token carrying a nonce nobody asked for
            "other-audience" an id_token made out to another client
            "invalid-token"  an id_token whose claims were changed after signing
    "delay": {"/o/token/": 8} answer a path that many seconds late
"""

import base64
import json
import time
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.utils import timezone
from jwcrypto import jwk, jwt
from oauth2_provider.models import Application
from oauth2_provider.oauth2_validators import OAuth2Validator


def state() -> dict:
    return json.loads(settings.STATE_FILE.read_text())


class StateBackend(ModelBackend):
    """Users and passwords from the state file; the row is made on first use."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        person = state()["users"].get(username)
        if person is None or person["password"] != password:
            return None
        user, _ = get_user_model().objects.get_or_create(username=username)
        return user


class StateMiddleware:
    """Answers late where the state asks; before a sign-out, gives the client
    the addresses to come back to that the state lists now."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        current = state()
        seconds = current.get("delay", {}).get(request.path)
        if seconds:
            time.sleep(seconds)
        if request.path == "/o/logout/":
            client = current["client"]
            Application.objects.filter(client_id=client["id"]).update(
                post_logout_redirect_uris=" ".join(client["post_logout_redirect_uris"])
            )
        return self.get_response(request)


class Validator(OAuth2Validator):
    # Every claim below goes into the id_token and userinfo whatever the
    # scopes, as many providers do for a group claim they are set up to send.
    oidc_claim_scope = None

    def get_additional_claims(self, request):
        current = state()
        person = current["users"].get(request.user.username, {})
        return {
            "preferred_username": request.user.username,
            "email": person.get("email", f"{request.user.username}@example.com"),
            current.get("groups_claim", "groups"): person.get("groups", []),
        }

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        return redirect_uri in state()["redirect_uris"]

    def finalize_id_token(self, id_token, token, token_handler, request):
        # The token is made and stored as usual first, so that everything
        # else (the access token, userinfo) stays as the library makes it.
        made = super().finalize_id_token(id_token, token, token_handler, request)
        mode = state().get("mode", "normal")
        if mode == "normal":
            return made
        if mode == "invalid-token":
            # The claims changed after signing: the signature no longer fits.
            head, claims, signature = made.split(".")
            forged = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
            forged["sub"] = "someone-else"
            claims = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
            return f"{head}.{claims}.{signature}"
        key = request.client.jwk_key
        if mode == "expired":
            now = int(timezone.now().timestamp())
            id_token.update(iat=now - 7200, exp=now - 3600)
        elif mode == "other-audience":
            id_token["aud"] = "another-client"
        elif mode == "wrong-nonce":
            id_token["nonce"] = f"not-{uuid.uuid4().hex}"
        elif mode == "unknown-key":
            key = jwk.JWK.from_pem((settings.WORKDIR / "other-key.pem").read_bytes())
        header = {"typ": "JWT", "alg": "RS256", "kid": key.thumbprint()}
        remade = jwt.JWT(header=json.dumps(header), claims=json.dumps(id_token, default=str))
        remade.make_signed_token(key)
        return remade.serialize()
