"""``Authorization: Token srv_...``: serve tokens, accepted by the act endpoint only."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from webapp.serving.models import KEY_PREFIX, ServeToken


class ServeTokenAuthentication(authentication.TokenAuthentication):
    """Authenticates a serve token as its owner, with the token as ``request.auth``.

    Keys without the ``srv_`` prefix are left to the account-token class that follows it.
    """

    def authenticate_credentials(self, key: str):
        token = ServeToken.objects.select_related("owner").filter(key=key).first()
        if token is None or not token.owner.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked serve token.")
        return token.owner, token

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"token" or not header[1].startswith(KEY_PREFIX.encode()):
            return None
        return self.authenticate_credentials(header[1].decode("ascii", errors="replace"))
