"""``manage.py conflicts``: what several releases of one source disclose together.

    python manage.py conflicts source.csv release1.csv release2.csv --id name \\
        [--qi age,zip] [--sensitive disease] [--k 5] [--l 2] [--sep ';'] [--format json]

Each release file is in lineage form: the published columns plus the source's id column. A
quasi-identifier column is read as its generalized classes; a numeric column whose rows share a
value that is the mean of their source values is read as that group's mean. Exit status 0 when
nothing is found, 1 with findings (or a part too large to decide), 2 on bad input (one line).
Inferred values are source values: the JSON and the text name them, for the privacy officer.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.reading import add_reading_options, file_labels, reading


class Command(BaseCommand):
    help = "Check releases of one source for what they disclose together."
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        usage_error = parser.error

        def one_line(message):
            # A usage error is one line and status 2, like every other bad input here (argparse
            # would print the whole usage first).
            if not getattr(parser, "called_from_command_line", False):
                return usage_error(message)
            sys.stderr.write(f"{parser.prog}: error: {' '.join(str(message).split())}\n")
            raise SystemExit(2)

        # argparse has no hook for its error message but the method itself
        parser.error = one_line  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser) -> None:
        parser.add_argument("source", help="the source table (CSV/TSV, Excel or Parquet)")
        parser.add_argument("releases", nargs="+", metavar="release", help="release files")
        parser.add_argument("--id", required=True, help="the record id column (in every file)")
        parser.add_argument("--qi", default="", help="quasi-identifiers, comma separated")
        parser.add_argument("--sensitive", default="", help="sensitive column(s), comma separated")
        parser.add_argument("--k", default=None, help="report joined classes smaller than K")
        parser.add_argument("--l", default=None, help="report fewer than L sensitive values")
        parser.add_argument(
            "--p",
            default="5",
            help="report values confined to within P %% of themselves (0: exact values only)",
        )
        parser.add_argument(
            "--bounds",
            action="append",
            default=[],
            metavar="COL=LOW:HIGH",
            help="public bounds of a numeric column (default: its observed range); repeatable",
        )
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        add_reading_options(parser)
        parser.add_argument("--format", choices=("text", "json"), default="text")

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            report, ids, decimals = self._check(options)
        except CoreError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None
        result = report.to_dict(ids)
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False))
        else:
            self.stdout.write(render_text(result, decimals))
        if report.conflicting:
            raise SystemExit(1)

    def _check(self, options):
        from anonweb.core.conflicts.check import check_conflicts
        from anonweb.core.conflicts.lineage import source_ids, view_from_lineage_form
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import parse_column_list, read_table, require_columns

        k = _whole(options["k"], "--k", 2)
        l_ = _whole(options["l"], "--l", 2)
        p = _percent(options["p"])
        qis = parse_column_list(options["qi"])
        sensitive = parse_column_list(options["sensitive"])
        if l_ is not None and not sensitive:
            raise ParameterError("--l needs --sensitive (the column whose values it counts)")
        if k is not None and not qis:
            raise ParameterError("--k needs --qi (the columns whose classes it joins)")
        bounds = _bounds(options["bounds"])
        source = read_table(options["source"], sep=options["sep"], **reading(options))
        require_columns(source, [*sensitive, *bounds], role="column")
        ids = source_ids(source, options["id"])
        labels = file_labels(options["releases"])
        views = []
        for path, label in zip(options["releases"], labels, strict=True):
            release = read_table(path, sep=options["sep"], **reading(options, main=False))
            views.append(
                view_from_lineage_form(
                    source,
                    release,
                    label=label,
                    id_column=options["id"],
                    ids=ids,
                    quasi_identifiers=qis,
                )
            )
        report = check_conflicts(
            source,
            views,
            quasi_identifiers=qis,
            sensitive=sensitive,
            k=k,
            l=l_,
            p=p,
            bounds=bounds,
        )
        return report, source[options["id"]].tolist(), _decimals(source)


def _whole(raw, option: str, low: int):
    from anonweb.core.errors import ParameterError

    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ParameterError(f"{option} expects a whole number, got {raw!r}") from None
    if value < low:
        raise ParameterError(f"{option} must be at least {low}, got {value}")
    return value


def _percent(raw: str):
    from anonweb.core.errors import ParameterError

    try:
        value = float(raw)
    except ValueError:
        raise ParameterError(f"--p expects a percentage, got {raw!r}") from None
    if not 0 <= value < 100:
        raise ParameterError(f"--p must be between 0 and 100, got {raw}")
    return value / 100 if value else None


def _bounds(specs: list[str]) -> dict[str, tuple[float, float]]:
    from anonweb.core.errors import ParameterError

    out = {}
    for spec in specs:
        col, eq, rng = spec.partition("=")
        low, colon, high = rng.partition(":")
        try:
            if not eq or not colon or not col.strip():
                raise ValueError
            lo, hi = float(low), float(high)
        except ValueError:
            raise ParameterError(f"--bounds expects COL=LOW:HIGH, got {spec!r}") from None
        if not lo <= hi:
            raise ParameterError(f"--bounds {spec!r}: LOW must not exceed HIGH")
        out[col.strip()] = (lo, hi)
    return out


def _decimals(source) -> dict[str, int]:
    """Decimals to print inferred values with: at least 2, more if the column has them."""
    import pandas as pd

    out = {}
    for col in source.columns:
        if pd.api.types.is_float_dtype(source[col]):
            text = source[col].dropna().head(1000).map(repr)
            frac = text.str.split(".").str[1].fillna("").str.rstrip("0").str.len()
            out[str(col)] = int(min(max(2, frac.max() if len(frac) else 2), 10))
        else:
            out[str(col)] = 2
    return out


def render_text(r: dict, decimals: dict[str, int]) -> str:
    findings = r["findings"]
    lines = [f"{len(r['releases'])} release(s) checked: {', '.join(r['releases'])}"]
    lines += [f"  note: {n}" for n in r["notes"]]
    if not findings and not r["incomplete"]:
        lines.append("no conflicts found: combining the releases discloses nothing new")
    for f in findings:
        cols = f" [{', '.join(f['columns'])}]" if f["columns"] else ""
        lines.append(
            f"{f['type']}{cols}: {len(f['records'])} record(s), releases {', '.join(f['releases'])}"
        )
        lines.append(f"  {f['explanation']}")
        places = decimals.get(f["columns"][0], 2) if f["columns"] else 2
        shown = f["records"][:20]
        for rec in shown:
            value = f.get("values", {}).get(str(rec))
            interval = f.get("intervals", {}).get(str(rec))
            if interval:
                lines.append(
                    f"    {rec}: between {interval[0]:.{places}f} and {interval[1]:.{places}f}"
                )
            elif value is not None:
                lines.append(f"    {rec}: {value:.{places}f}")
            else:
                lines.append(f"    {rec}")
        if len(f["records"]) > len(shown):
            lines.append(f"    ... and {len(f['records']) - len(shown)} more (see --format json)")
    for text in r["incomplete"]:
        lines.append(f"incomplete: {text}")
    return "\n".join(lines)
