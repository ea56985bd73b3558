"""``manage.py drf_create_token USERNAME``: a new API token for a user, its key printed once.

It replaces the command of Django REST framework, which stores keys as they are: anonweb
stores only their SHA-256, so the key cannot be shown again and every call makes a new one
(replacing the user's previous token, as the profile page does)."""

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from anonweb.accounts.services import api_token_create


class Command(BaseCommand):
    help = "Create a new API token for a user (replacing theirs) and print its key once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "-r",
            "--reset",
            action="store_true",
            help="accepted for compatibility: every call makes a new token",
        )

    def handle(self, *args, **options):
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        key = api_token_create(user=user)
        self.stdout.write(
            f"Generated token {key} for user {user.username} (shown once: it is stored as its "
            "SHA-256 only)"
        )
