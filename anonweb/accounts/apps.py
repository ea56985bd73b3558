import contextlib

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anonweb.accounts"
    label = "accounts"

    def ready(self) -> None:
        from anonweb.accounts import admin_audit, signals  # noqa: F401 (connects receivers)

        signals.connect_lockout_signal()
        _hide_plain_token_admin()


def _hide_plain_token_admin() -> None:
    """Django REST framework's token admin makes keys stored in plain text, which the API no
    longer accepts: tokens are managed as ApiToken (the admin has registered every app's models
    by now, the admin app's own ready() having run first)."""
    from django.contrib import admin
    from django.contrib.admin.exceptions import NotRegistered
    from rest_framework.authtoken.models import TokenProxy

    with contextlib.suppress(NotRegistered):
        admin.site.unregister(TokenProxy)
