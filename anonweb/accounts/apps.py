from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anonweb.accounts"
    label = "accounts"

    def ready(self) -> None:
        from anonweb.accounts import signals

        signals.connect_lockout_signal()
