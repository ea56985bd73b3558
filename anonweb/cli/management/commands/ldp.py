"""``manage.py ldp``: randomize one column record by record (local differential privacy).

A categorical column gets k-ary randomized response and the report holds the debiased counts;
with ``--bounds`` a numeric column is clamped and gets Laplace noise instead. Outputs are written
to temporary files and renamed only when both are complete.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.reading import add_reading_options, reading


class Command(BaseCommand):
    help = "Randomize a column locally: randomized response, or Laplace noise with --bounds."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="CSV/TSV, Excel or Parquet file")
        parser.add_argument("--column", required=True, help="the column to randomize")
        parser.add_argument("--epsilon", required=True, help="local privacy parameter ε")
        parser.add_argument(
            "--bounds",
            default=None,
            metavar="LO,HI",
            help="numeric column: declared range (Laplace noise)",
        )
        parser.add_argument(
            "--categories-from",
            default=None,
            metavar="FILE",
            help="table whose COLUMN lists the public categories",
        )
        parser.add_argument(
            "--missing-as",
            default=None,
            metavar="VALUE",
            help="the declared category (or, with --bounds, the value) missing values are reported as",
        )
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        add_reading_options(parser)
        parser.add_argument(
            "--out", required=True, help="CSV of the table with the column randomized"
        )
        parser.add_argument("--report", required=True, help="JSON report (ε, estimated counts)")

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            self._run(options)
        except CoreError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None

    def _run(self, options) -> None:
        from anonweb.core.dp import accounting as dp_accounting
        from anonweb.core.dp.local import randomize_categories, randomize_numeric
        from anonweb.core.dp.mechanisms import categories_from_frame
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import read_table

        column = options["column"].strip()
        dp_accounting.check_epsilon(options["epsilon"])
        if options["bounds"] is not None:
            dp_accounting.check_bounds(options["bounds"], what=f"local noise on {column!r}")
        categories = None
        if options["categories_from"]:
            frame = read_table(
                options["categories_from"], sep=options["sep"], **reading(options, main=False)
            )
            categories = list(categories_from_frame(frame, [column])[column])
        elif options["bounds"] is None:
            raise ParameterError(
                "randomized response needs the public categories: --categories-from FILE "
                "(a table whose column of that name lists them); read from the data, the "
                "possible answers would depend on who is in the table"
            )
        df = read_table(options["path"], sep=options["sep"], **reading(options))
        if options["bounds"] is not None:
            result = randomize_numeric(
                df,
                column=column,
                epsilon=options["epsilon"],
                bounds=options["bounds"],
                missing_as=options["missing_as"],
            )
        else:
            result = randomize_categories(
                df,
                column=column,
                epsilon=options["epsilon"],
                categories=categories,
                missing_as=options["missing_as"],
            )
        report = {"file": str(options["path"]), "output": str(options["out"]), **result.report}
        _write_both(result.frame, report, out=options["out"], report_path=options["report"])
        self.stdout.write(
            f"randomized {column!r} in {len(df)} rows to {options['out']}: local ε = {report['epsilon_spent']:.6g}"
        )


def _write_both(table, report: dict, *, out: str, report_path: str) -> None:
    """Both files or neither."""
    from anonweb.cli.output import write_all

    write_all(
        [
            (out, lambda f: table.to_csv(f, index=False)),
            (report_path, lambda f: f.write(json.dumps(report, indent=2, allow_nan=False))),
        ]
    )
