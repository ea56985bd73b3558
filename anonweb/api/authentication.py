"""``Authorization: Token <key>`` against the stored SHA-256 of each key
(:class:`~anonweb.accounts.models.ApiToken`): a copy of the database holds no usable key."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from anonweb.accounts.models import ApiToken


class HashedTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        token = (
            ApiToken.objects.select_related("user").filter(digest=ApiToken.digest_of(key)).first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)
