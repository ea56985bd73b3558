from django.core.management.base import BaseCommand

from anonweb.jobs.retention import datasets_purge_expired


class Command(BaseCommand):
    help = "Delete the raw data of datasets whose retention date has passed (releases stay)."

    def handle(self, *args, **options):
        purged = datasets_purge_expired()
        self.stdout.write(
            f"purged {len(purged)} dataset(s)"
            + (f": {', '.join(map(str, purged))}" if purged else "")
        )
