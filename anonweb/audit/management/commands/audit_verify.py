from django.core.management.base import BaseCommand, CommandError

from anonweb.audit.selectors import audit_verify_chain


class Command(BaseCommand):
    help = (
        "Verify the audit trail's keyed hash chain and its anchored heads; exit status 1 "
        "naming every broken event."
    )

    def handle(self, *args, **options):
        report = audit_verify_chain()
        if not report.ok:
            for problem in report.problems:
                self.stderr.write(f"broken: {problem.describe()}")
            first = report.problems[0]
            where = f"event #{first.event_id}" if first.event_id else "the end of the chain"
            raise CommandError(
                f"audit chain broken in {len(report.problems)} place(s), first at {where}: "
                f"{first.reason} ({report.checked} events checked)",
                returncode=1,
            )
        self.stdout.write(f"audit chain intact: {report.checked} events verified")
