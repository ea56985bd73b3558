"""``manage.py dp-release``: one differentially private release of a table, on OpenDP.

The cost and the 95% accuracy are computed from the measurement before the data is read
(``--preview`` stops there). Outputs are written to temporary files and renamed only when both
are complete, so a failed release leaves nothing behind.
"""

from __future__ import annotations

import json
import math

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.reading import add_reading_options, reading

# Categories that are not declared public must be selected privately, which costs a δ; 1e-6 is
# far below 1/n for any table this tool is meant for. The report states the δ spent.
DEFAULT_KEY_DELTA = 1e-6


class Command(BaseCommand):
    help = (
        "Release a DP statistic of a table (one flag per statistic: a count, a histogram, a sum, "
        "a mean, quantiles, range counts, and any other registered)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="CSV/TSV, Excel or Parquet file")
        from anonweb.core.dp.statistic import statistics

        what = parser.add_mutually_exclusive_group(required=True)
        # one flag per registered statistic: a switch for one that reads no column
        for statistic in statistics():
            flag, text = f"--{statistic.kind}", statistic.cli_help or f"a DP {statistic.kind}"
            if statistic.columns == 0:
                what.add_argument(flag, action="store_true", help=text)
            else:
                what.add_argument(flag, metavar=statistic.cli_metavar, help=text)
        parser.add_argument("--epsilon", required=True, help="privacy budget ε for this release")
        parser.add_argument(
            "--delta",
            default=None,
            help=f"δ for selecting categories privately (histograms without --categories-from; default {DEFAULT_KEY_DELTA:g})",
        )
        parser.add_argument("--bounds", default=None, metavar="LO,HI", help="declared value range")
        parser.add_argument("--alphas", default="0.5", help="quantile levels, comma separated")
        parser.add_argument("--bins", default="32", help="bins of the range/quantile tree")
        parser.add_argument(
            "--categories-from",
            default=None,
            metavar="FILE",
            help="table whose columns list the public categories",
        )
        parser.add_argument(
            "--no-missing",
            action="store_true",
            help="no (missing) cell: refuse missing values instead of counting them",
        )
        parser.add_argument("--identifier", default=None, help="column naming the person of a row")
        parser.add_argument("--max-contributions", default="1", help="rows kept per person")
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        add_reading_options(parser)
        parser.add_argument("--out", default=None, help="CSV of the released statistics")
        parser.add_argument("--report", default=None, help="JSON report (cost, accuracy)")
        parser.add_argument(
            "--preview",
            action="store_true",
            help="print cost and accuracy without reading the data",
        )

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            self._run(options)
        except CoreError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None

    def _run(self, options) -> None:
        import numpy as np

        from anonweb.core.dp.mechanisms import DPQuery, prepare, release
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import read_table
        from anonweb.core.numbers import for_people, probability

        query = DPQuery.from_params(_params(options))
        preview = prepare(query).preview()
        if options["preview"]:
            self.stdout.write(json.dumps(_clean(preview), indent=2))
            return
        if not options["out"] or not options["report"]:
            raise ParameterError("name both --out (CSV) and --report (JSON), or use --preview")
        df = read_table(options["path"], sep=options["sep"], **reading(options))
        # Fresh entropy: only row sampling per person uses it, and no seed is ever recorded.
        result = release(df, query, rng=np.random.default_rng())
        report = {"file": str(options["path"]), "output": str(options["out"]), **result.report}
        write_outputs(result.table, report, out=options["out"], report_path=options["report"])
        self.stdout.write(
            f"released {query.kind} ({len(result.table)} rows) to {options['out']}: "
            f"ε = {for_people(report['epsilon_spent'])}, δ = {probability(report['delta_spent'])}"
        )


def _params(options) -> dict:
    from anonweb.core.dp.mechanisms import categories_from_frame
    from anonweb.core.dp.statistic import statistics
    from anonweb.core.io.frame import parse_column_list, read_table

    statistic = next(s for s in statistics() if options.get(s.kind))
    kind = statistic.kind
    columns = parse_column_list(options[kind]) if statistic.columns != 0 else []
    params = {"kind": kind, "epsilon": options["epsilon"], "columns": columns}
    if options["delta"] is not None:
        params["delta"] = options["delta"]
    elif "categories" in statistic.parameters and not options["categories_from"]:
        params["delta"] = DEFAULT_KEY_DELTA
    if "bounds" in statistic.parameters:
        params["bounds"] = options["bounds"]
        params["bins"] = options["bins"]
        params["alphas"] = parse_column_list(options["alphas"])
    if options["categories_from"]:
        frame = read_table(
            options["categories_from"], sep=options["sep"], **reading(options, main=False)
        )
        params["categories"] = categories_from_frame(frame, columns)
    if options["identifier"]:
        params["identifier"] = options["identifier"]
    params["max_contributions"] = options["max_contributions"]
    params["count_missing"] = not options["no_missing"]
    return params


def _clean(value):
    """JSON without NaN: an empty release's quantile is ``null``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_outputs(table, report: dict, *, out: str, report_path: str) -> None:
    """Both files or neither."""
    from anonweb.cli.output import write_all

    write_all(
        [
            (out, lambda f: table.to_csv(f, index=False)),
            (report_path, lambda f: f.write(json.dumps(_clean(report), indent=2, allow_nan=False))),
        ]
    )
