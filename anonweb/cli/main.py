"""The ``anonweb`` command installed with the package: the computation commands with no
settings at all (no ``SECRET_KEY``, no ``DEBUG``, no database)::

    anonweb assess data.csv --qi age,zip,sex --sensitive diagnosis
    anonweb anonymize data.csv --qi age,sex --hierarchy age=age.csv ... --out out.csv

``python manage.py <command>`` runs the same commands; it also needs no settings for these.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import NoReturn

# The commands that only compute: they read and write files, never the database.
COMMANDS = ("assess", "anonymize", "dp-release", "ldp", "intruder", "conflicts", "attacks")
SETTINGS = "anonweb.cli.settings"

USAGE = """usage: anonweb <command> [options]

Commands (anonweb <command> --help for the options of each):
  assess      the disclosure-risk profile of a table
  anonymize   a table anonymized by a release plan or by optimal generalization
  dp-release  differentially private aggregates (OpenDP)
  ldp         local differential privacy (randomized response, Laplace)
  intruder    a maximum-knowledge intruder's record linkage against a release
  conflicts   what several releases of one source disclose together
  attacks     linkage, inference, singling out and membership attacks on a release
"""


def main(argv: list[str] | None = None, prog: str = "anonweb") -> int:
    args = list(sys.argv if argv is None else argv)
    if len(args) < 2 or args[1] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if args[1] not in COMMANDS:
        sys.stderr.write(f"anonweb: unknown command {args[1]!r}\n{USAGE}")
        return 2
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    from django.core.management import ManagementUtility

    utility = ManagementUtility([prog, *args[1:]])
    utility.prog_name = prog
    try:
        utility.execute()
    except SystemExit as exc:  # argparse and CommandError exit this way, with their status
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def finish(code: int) -> NoReturn:
    """Leave the process once a command's work is written, with ``code`` as its status.

    pyarrow's C++ thread pools are still alive when the interpreter tears itself down, and about
    one exit in a hundred on a busy machine aborts there ("terminate called without an active
    exception", status -6) after the output is complete (apache/arrow#34314): a script would
    read a finished report as a failure. So the Python-level clean-up runs (atexit handlers,
    logging, temporary directories, open streams flushed) and the native teardown is skipped.
    """
    _flush()
    atexit._run_exitfuncs()
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to write
            stream.flush()


def run() -> NoReturn:
    """The installed ``anonweb`` command."""
    finish(main())


if __name__ == "__main__":
    run()
