from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anonweb.accounts"
    label = "accounts"
