from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anonweb.accounts"
    label = "accounts"

    def ready(self) -> None:
        from anonweb.accounts import admin_audit, signals  # noqa: F401 (connects receivers)

        signals.connect_lockout_signal()
