"""``manage.py attacks``: what an attacker gets from a release, against a control.

    anonweb attacks SOURCE RELEASE --known COL,COL [--sensitive COL,...] [--control CONTROL]
        [--targets N] [--seed S] [--format json]

SOURCE is the table the release was made from, CONTROL people of the same population who are
not in it (held out before the release was made). Without CONTROL the rates are reported but
the excess over chance cannot be measured, and the output says so. Exit status 0, or 2 on bad
input (one line). The figures are computed from the source: they are for the privacy officer
and the data steward, not for the release's recipients.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the record-level attacks of a release against its source and a control."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("source", help="the table the release was made from")
        parser.add_argument("release", help="the release file")
        parser.add_argument(
            "--known", required=True, help="columns the attacker knows, comma separated"
        )
        parser.add_argument(
            "--sensitive", default="", help="columns the attacker infers, comma separated"
        )
        parser.add_argument(
            "--control", default=None, help="people of the same population not in the release"
        )
        parser.add_argument("--targets", default="2000", help="people attacked (default 2000)")
        parser.add_argument("--seed", default=None, help="seed for drawing the targets")
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        parser.add_argument("--format", choices=("text", "json"), default="text")

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            report = self._run(options)
        except CoreError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None
        result = report.to_dict()
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False))
            return
        for sentence in result["sentences"]:
            self.stdout.write(sentence)
        if result["note"]:
            self.stdout.write(result["note"])

    def _run(self, options):
        import numpy as np

        from anonweb.core.attacks.run import run_attacks
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import parse_column_list, read_table

        known = parse_column_list(options["known"])
        if not known:
            raise ParameterError("name the columns the attacker knows: --known COL,COL")
        targets = _whole(options["targets"], "--targets", 1)
        seed = _whole(options["seed"], "--seed", 0) if options["seed"] is not None else None
        source = read_table(options["source"], sep=options["sep"])
        release = read_table(options["release"], sep=options["sep"])
        control = read_table(options["control"], sep=options["sep"]) if options["control"] else None
        return run_attacks(
            source,
            release,
            known=known,
            sensitive=parse_column_list(options["sensitive"]),
            control=control,
            targets=targets,
            rng=np.random.default_rng(seed),
        )


def _whole(raw: str, option: str, low: int) -> int:
    from anonweb.core.errors import ParameterError

    try:
        value = int(raw)
    except ValueError:
        raise ParameterError(f"{option} expects a whole number, got {raw!r}") from None
    if value < low:
        raise ParameterError(f"{option} must be at least {low}, got {value}")
    return value
