"""``Authorization: Token ...`` for the act endpoint, through the serving cache.

:class:`ServeTokenAuthentication` accepts serve tokens (``srv_...``, which open the act
endpoint only); :class:`CachedTokenAuthentication` accepts account tokens. Both read the
token's credential from ``webapp/serving/cache.py`` in the act request's one preflight round
trip to Redis (``services.act_preflight``: the token's rate-limit count, the agent's cached
entry, the credential) and read the database only on a miss, so a steady stream of act calls
never queries it. ``request.auth`` is a :class:`TokenAuth` carrying both results.

On a hit, ``request.user`` is a ``User`` built from the cached fields (id, username, join
time, active), not loaded from the database: the act endpoint reads only its id and join time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from webapp.serving import cache, services
from webapp.serving.models import KEY_PREFIX, ServeToken


@dataclass(frozen=True)
class TokenAuth:
    """``request.auth`` of a token request: who the token is and the request's preflight."""

    credential: cache.Credential
    preflight: services.Preflight


def _token_key(request) -> str | None:
    header = authentication.get_authorization_header(request).split()
    if len(header) != 2 or header[0].lower() != b"token":
        return None
    try:
        return header[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Invalid token header: not ASCII.") from None


def _user_of(credential: cache.Credential):
    """A ``User`` carrying the cached fields (never saved)."""
    user = get_user_model()(
        id=credential.user_id,
        username=credential.username,
        is_active=credential.is_active,
        date_joined=cache.from_stamp(credential.date_joined_us),
    )
    user._state.adding = False
    user._state.db = "default"
    return user


def _credential(kind: str, key: str, user, **token) -> cache.Credential:
    return cache.Credential(
        kind=kind,
        user_id=user.pk,
        username=user.get_username(),
        date_joined_us=cache.stamp(user.date_joined),
        is_active=user.is_active,
        key_hash=hashlib.sha256(key.encode()).hexdigest(),
        **token,
    )


class _CachedAuthentication(authentication.BaseAuthentication):
    keyword = "Token"
    failure = "Invalid token."

    def accepts(self, key: str) -> bool:
        raise NotImplementedError

    def load(self, key: str) -> cache.Credential | None:
        """The credential of ``key`` from the database, or ``None`` when there is no such token."""
        raise NotImplementedError

    def authenticate(self, request):
        key = _token_key(request)
        if key is None or not self.accepts(key):
            return None
        agent_id = int(request.parser_context["kwargs"]["agent_id"])
        preflight = services.act_preflight(identity=services.token_identity(key), agent_id=agent_id, token_key=key)
        credential = preflight.credential
        if credential is None:
            credential = self.load(key)
            if credential is None:
                raise exceptions.AuthenticationFailed(self.failure)
            cache.credential_store(key, credential)
        if not credential.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return _user_of(credential), TokenAuth(credential, preflight)

    def authenticate_header(self, request) -> str:
        return self.keyword


class ServeTokenAuthentication(_CachedAuthentication):
    """Serve tokens (``srv_`` keys); other keys are left to the classes that follow."""

    failure = "Invalid or revoked serve token."

    def accepts(self, key: str) -> bool:
        return key.startswith(KEY_PREFIX)

    def load(self, key: str) -> cache.Credential | None:
        token = ServeToken.objects.select_related("owner").filter(key=key).first()
        if token is None:
            return None
        return _credential(
            "serve", key, token.owner, token_id=token.pk, token_stamp=cache.stamp(token.created_at),
            agent_id=token.agent_id,
        )  # fmt: skip


class CachedTokenAuthentication(_CachedAuthentication):
    """Account tokens (``rest_framework.authtoken``), as DRF's ``TokenAuthentication`` but cached."""

    def accepts(self, key: str) -> bool:
        return not key.startswith(KEY_PREFIX)

    def load(self, key: str) -> cache.Credential | None:
        token = Token.objects.select_related("user").filter(key=key).first()
        return None if token is None else _credential("account", key, token.user)
