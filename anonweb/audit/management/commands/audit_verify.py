from django.core.management.base import BaseCommand, CommandError

from anonweb.audit.selectors import audit_verify_chain


class Command(BaseCommand):
    help = "Verify the audit trail's hash chain; exit status 1 naming the first broken event."

    def handle(self, *args, **options):
        report = audit_verify_chain()
        if not report.ok:
            where = f"event #{report.broken_id}" if report.broken_id else "the end of the chain"
            raise CommandError(
                f"audit chain broken at {where}: {report.reason} ({report.checked} events verified before it)",
                returncode=1,
            )
        self.stdout.write(f"audit chain intact: {report.checked} events verified")
