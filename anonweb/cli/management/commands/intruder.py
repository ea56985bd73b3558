"""``manage.py intruder``: can a maximum-knowledge intruder link the anonymized records?

The intruder knows both tables, links each original record to its closest anonymized record
(after reverse mapping) and checks the links against matches made by chance. Prints JSON with
the share of links that are not plausibly deniable and both distance distributions.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.reading import add_engine_options, add_reading_options, reading


class Command(BaseCommand):
    help = "Record linkage by a maximum-knowledge intruder, verified against a random baseline."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("original", help="the original table")
        parser.add_argument("anonymized", help="the anonymized table (same records, same order)")
        parser.add_argument(
            "--columns", required=True, help="numeric or ordinal columns, comma separated"
        )
        parser.add_argument(
            "--metric",
            choices=("rank", "euclidean"),
            default="rank",
            help="rank: largest rank difference (permutation distance); "
            "euclidean: standardised values",
        )
        parser.add_argument(
            "--baseline",
            choices=("records", "attributes"),
            default="records",
            help="random records drawn whole, or attribute by attribute",
        )
        parser.add_argument(
            "--baseline-size", default=None, help="random records (default max(n, 2000))"
        )
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        parser.add_argument(
            "--seed", type=int, default=None, help="seed of the random baseline (not recorded)"
        )
        add_reading_options(parser)
        add_engine_options(parser)
        parser.add_argument("--format", choices=("json", "text"), default="json")

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            result = self._run(options)
        except CoreError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False))
        else:
            self.stdout.write(
                f"{result['n_records']} records on {', '.join(result['columns'])} ({result['metric']}): "
                f"{100 * result['not_deniable_share']:.1f}% of links not plausibly deniable "
                f"(match distance below {result['threshold']:.4g}, the 5th percentile of chance), "
                f"{100 * result['correct_link_share']:.1f}% linked to their own record"
            )

    def _run(self, options) -> dict:
        import numpy as np

        from anonweb.core.engine.base import peak_memory_bytes
        from anonweb.core.engine.select import choose_engine
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import parse_column_list, read_table
        from anonweb.core.risk.intruder import intruder_check

        columns = parse_column_list(options["columns"])
        if not columns:
            raise ParameterError("name the columns to compare: --columns COL,COL")
        size = options["baseline_size"]
        if size is not None:
            try:
                size = int(size)
            except ValueError:
                raise ParameterError(
                    f"--baseline-size must be a whole number, not {size!r}"
                ) from None
        rng = np.random.default_rng(options["seed"])
        kw = {"metric": options["metric"], "baseline": options["baseline"], "n_baseline": size}
        engine = choose_engine(options["engine"], options["original"])
        if engine == "pandas":
            original = read_table(options["original"], sep=options["sep"], **reading(options))
            anonymized = read_table(options["anonymized"], sep=options["sep"], **reading(options))
            result = intruder_check(original, anonymized, columns=columns, rng=rng, **kw)
        else:
            result = self._on_engine(options, engine, columns, rng, kw)
        return {
            "original": str(options["original"]),
            "anonymized": str(options["anonymized"]),
            **result.to_dict(),
            "engine": engine,
            "peak_memory_bytes": peak_memory_bytes(children=engine == "spark"),
        }

    @staticmethod
    def _on_engine(options, name, columns, rng, kw):
        """The check out of core: DuckDB sets the two files side by side, the engine counts
        the records per pair of values (:mod:`anonweb.core.assessment.intruder_engine`)."""
        import shutil
        import tempfile

        from anonweb.core.assessment.intruder_engine import intruder_check_on_engine
        from anonweb.core.engine.duckdb_engine import DuckDBEngine
        from anonweb.core.engine.select import make_engine

        for option, given in (
            ("--sheet", options["sheet"]),
            ("--decimal ,", options["decimal"] != "."),
        ):
            if given:
                raise CommandError(
                    f"{option} reads the table in memory: use --engine pandas, not {name}",
                    returncode=2,
                )
        duck = make_engine("duckdb", options["original"], memory_limit=options["memory_limit"])
        assert isinstance(duck, DuckDBEngine)
        engine = duck if name == "duckdb" else make_engine(name, options["original"])
        # the two files side by side go where DuckDB spills (ANONWEB_DUCKDB_TEMP_DIRECTORY)
        work = tempfile.mkdtemp(prefix="anonweb-intruder-", dir=duck.temp_directory)
        try:
            return intruder_check_on_engine(
                engine,
                duck,
                options["original"],
                options["anonymized"],
                columns=columns,
                rng=rng,
                workdir=work,
                **kw,
            )
        finally:
            if engine is not duck:
                engine.close()
            duck.close()
            shutil.rmtree(work, ignore_errors=True)
