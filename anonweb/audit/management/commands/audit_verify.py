from django.core.management.base import BaseCommand, CommandError

from anonweb.audit.selectors import audit_verify_chain
from anonweb.releases.integrity import release_objects_verify


class Command(BaseCommand):
    help = (
        "Verify the audit trail's keyed hash chain and its anchored heads, then that each "
        "release's stored objects have the SHA-256 (and version) its creation event recorded; "
        "exit status 1 naming every broken event or object."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--skip-objects",
            action="store_true",
            help="verify the chain only, without reading the release objects back",
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
        if options.get("skip_objects"):
            return
        objects = release_objects_verify()
        if not objects.ok:
            for broken in objects.problems:
                self.stderr.write(f"broken: {broken.describe()}")
            raise CommandError(
                f"release objects differ from their audit record in {len(objects.problems)} "
                f"place(s), first: {objects.problems[0].describe()} "
                f"({objects.checked} objects checked)",
                returncode=1,
            )
        self.stdout.write(
            f"release objects intact: {objects.checked} objects of {objects.releases} "
            "releases match their recorded SHA-256"
        )
