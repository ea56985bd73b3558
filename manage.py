#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    from anonweb.cli.main import COMMANDS, SETTINGS, finish
    from anonweb.cli.main import main as compute

    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        # the computation commands touch no database or session: they need no SECRET_KEY
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
        finish(compute(sys.argv, prog=os.path.basename(sys.argv[0])))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonweb.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
