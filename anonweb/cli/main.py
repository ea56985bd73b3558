"""The ``anonweb`` command installed with the package: the computation commands with no
settings at all (no ``SECRET_KEY``, no ``DEBUG``, no database)::

    anonweb assess data.csv --qi age,zip,sex --sensitive diagnosis
    anonweb anonymize data.csv --qi age,sex --hierarchy age=age.csv ... --out out.csv

``python manage.py <command>`` runs the same commands; it also needs no settings for these.
"""

from __future__ import annotations

import os
import sys

# The commands that only compute: they read and write files, never the database.
COMMANDS = ("assess", "anonymize", "dp-release", "ldp", "intruder", "conflicts")
SETTINGS = "anonweb.cli.settings"

USAGE = """usage: anonweb <command> [options]

Commands (anonweb <command> --help for the options of each):
  assess      the disclosure-risk profile of a table
  anonymize   a table anonymized by a release plan or by optimal generalization
  dp-release  differentially private aggregates (OpenDP)
  ldp         local differential privacy (randomized response, Laplace)
  intruder    a maximum-knowledge intruder's record linkage against a release
  conflicts   what several releases of one source disclose together
"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv if argv is None else argv)
    if len(args) < 2 or args[1] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if args[1] not in COMMANDS:
        sys.stderr.write(f"anonweb: unknown command {args[1]!r}\n{USAGE}")
        return 2
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    from django.core.management import ManagementUtility

    utility = ManagementUtility(["anonweb", *args[1:]])
    utility.prog_name = "anonweb"
    try:
        utility.execute()
    except SystemExit as exc:  # argparse and CommandError exit this way, with their status
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
