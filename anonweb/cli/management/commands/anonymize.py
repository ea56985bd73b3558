"""Anonymize a table with a release plan, or with the generalization-search shortcut.

    python manage.py anonymize data.csv --plan plan.json --out out.csv --report report.json
    python manage.py anonymize adult.csv --sep ';' --qi age,sex --hierarchy age=age.csv \\
        --hierarchy sex=sex.csv --k 5 --suppression 0.02 --out out.csv --report report.json

The search minimises ARX's default objective, Loss aggregated by the geometric mean over the
quasi-identifiers; ``--metric`` and ``--aggregate`` choose another (the report's
``information_loss`` is the score minimised, ``information_loss_measure`` says which).

Bad input exits with status 2 and one line on stderr; no output file is left behind (files are
written to a temporary name beside the target and renamed only on success). Keys come from files
(``--secret NAME=PATH``), never from the command line; the seed is never written anywhere.

The release is made by :func:`anonweb.core.release.make.make_release`, as the web job makes it;
``--earlier FILE`` (with ``--id COL``) hands it earlier releases of the source to check
conflicts against.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.model_flags import add_model_flags, model_specs
from anonweb.cli.model_flags import pairs as _pairs
from anonweb.cli.reading import add_engine_options, add_reading_options, reading
from anonweb.core.search.metrics import AGGREGATES, METRICS


class Command(BaseCommand):
    help = "Anonymize a table with a plan (--plan) or by optimal generalization (--qi ... --k ...)."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--plan", help="release plan (JSON)")
        from anonweb.core.io.export import EXPORT_FORMATS

        parser.add_argument(
            "--out",
            required=True,
            help="output table; its format by its suffix (CSV for any other)",
        )
        parser.add_argument(
            "--out-format",
            choices=list(EXPORT_FORMATS),
            default=None,
            help="output format, whatever the suffix of --out",
        )
        parser.add_argument("--report", help="report (JSON)")
        parser.add_argument("--sep", help="field separator of the input (default: sniffed)")
        add_reading_options(parser)
        parser.add_argument("--seed", type=int, help="seed for random steps (not recorded)")
        parser.add_argument("--secret", action="append", help="NAME=FILE: a key read from FILE")
        parser.add_argument("--qi", help="quasi-identifiers, comma separated")
        parser.add_argument("--hierarchy", action="append", help="COL=FILE (ARX format)")
        parser.add_argument("--k", type=int, default=None)
        parser.add_argument("--suppression", type=float, default=0.0)
        add_model_flags(parser)
        parser.add_argument(
            "--population-table",
            metavar="FILE",
            help="the population the table was drawn from (a table with the quasi-identifiers; "
            "the table must be part of it): --k-map counts its classes, --delta-presence "
            "compares with them",
        )
        parser.add_argument(
            "--metric",
            default="loss",
            choices=list(METRICS),
            help="information loss to minimise (default: ARX's Loss)",
        )
        parser.add_argument(
            "--aggregate",
            default=None,
            choices=list(AGGREGATES),
            help="how per-attribute losses combine (default: the metric's, geometric for Loss)",
        )
        parser.add_argument(
            "--purpose", help="why the data goes out (required; written in the report)"
        )
        parser.add_argument("--recipient", help="who receives it (required; in the report)")
        parser.add_argument(
            "--recipients",
            help="USER,group:NAME,...: the analysts and groups of the team who receive it, as "
            "the web's launch names them (in the report; none: every analyst of the team)",
        )
        parser.add_argument(
            "--keep-order",
            action="store_true",
            help="write rows in source order (default: shuffled); stated in the report",
        )
        parser.add_argument(
            "--tag",
            action="append",
            help="COL=ROLE column tag for the release gate (identifier, quasi_identifier, "
            "sensitive, other, keep); the plan's quasi-identifiers and sensitive columns are "
            "tagged so already",
        )
        parser.add_argument(
            "--fail-on-block",
            action="store_true",
            help="exit with status 1 when the release gate has blocking findings (the files are "
            "still written, for review); by default the findings are reported and the status is 0",
        )
        parser.add_argument(
            "--earlier",
            action="append",
            metavar="FILE",
            help="an earlier release of the same source, in lineage form (its published columns "
            "plus the source's id column, --id): the release is checked for conflicts with it, "
            "as the web checks a release against the live ones; repeatable",
        )
        parser.add_argument("--id", help="the source's record id column (with --earlier)")
        parser.add_argument(
            "--local-suppression",
            action="store_true",
            help="reach k by blanking cells of the quasi-identifiers instead of suppressing the "
            "records the search would suppress (k-anonymity only)",
        )
        parser.add_argument(
            "--importance",
            help="COL=W,...: with --local-suppression, the columns' importance (higher: blanked "
            "last; unnamed columns 0)",
        )
        parser.add_argument("--max-nodes", type=int, default=None)
        parser.add_argument("--time-limit", type=float, default=None)
        add_engine_options(parser)

    def handle(self, *args, **opts):
        from anonweb.core.errors import CoreError

        try:
            self._run(opts)
        except CoreError as exc:
            raise CommandError(str(exc).splitlines()[0], returncode=2) from None

    def _run(self, opts):
        import secrets as pysecrets

        import numpy as np

        from anonweb.core.engine.base import peak_memory_bytes
        from anonweb.core.engine.select import choose_engine
        from anonweb.core.io.frame import read_table, sniff_separator
        from anonweb.core.release.make import make_release
        from anonweb.core.release.plan import read_plan
        from anonweb.core.release.publish import fresh_secrets
        from anonweb.core.release.recipients import parse_recipients, split_recipients

        engine = choose_engine(opts["engine"], opts["path"])
        if opts["plan"] and opts["qi"]:
            raise CommandError("use either --plan or --qi/--k, not both", returncode=2)
        plan = read_plan(opts["plan"]) if opts["plan"] else self._search_plan(opts)
        secrets = {
            name: self._read_secret(path)
            for name, path in _pairs(opts["secret"], "--secret").items()
        }
        purpose = (opts["purpose"] or "").strip()
        recipient = (opts["recipient"] or "").strip()
        if not purpose or not recipient:
            raise CommandError(
                "state the release's purpose and recipient (--purpose, --recipient)", returncode=2
            )
        recipients = parse_recipients(split_recipients(opts["recipients"] or ""))
        tags = {q: "quasi_identifier" for q in plan.quasi_identifiers}
        tags |= {c: "sensitive" for c in plan.sensitive}
        tags |= _pairs(opts["tag"], "--tag")
        sep = _output_separator(opts["path"], opts["sep"], sniff_separator)
        rng = np.random.default_rng(opts["seed"])
        extra = {
            "purpose": purpose,
            "recipient": recipient,
            **({"recipients": list(recipients)} if recipients else {}),
        }
        # keys not supplied in files are drawn fresh for this release and never written
        secrets = fresh_secrets(plan, pysecrets.token_bytes, secrets)
        if engine != "pandas":
            self._run_on_engine(
                opts, plan, engine, tags=tags, rng=rng, sep=sep, extra=extra, secrets=secrets
            )
            return
        df = read_table(opts["path"], sep=opts["sep"], **reading(opts))
        # the same path as the web's release job: intruder check, lineage, attacks,
        # reconstruction, conflicts and the gate come with the release
        earlier = self._earlier(opts, df, tags)
        made = make_release(
            df,
            plan,
            rng=rng,
            secrets=secrets,
            tags=tags,
            earlier=earlier,
            keep_order=opts["keep_order"],
            population=self._population(opts),
        )
        gate = made.gate
        made.published["engine"] = "pandas"  # as the web job's release says
        summary = self._summary(made.report, plan)
        summary.update(
            **extra,
            row_order=made.published["row_order"],
            published=made.published,
            gate=gate.to_dict(),
            lineage=made.lineage(),
            conflicts=None if made.conflicts is None else made.conflicts.public,
            engine="pandas",
            peak_memory_bytes=peak_memory_bytes(),
        )
        from anonweb.cli.output import Writer, write_all

        outputs: list[tuple[str, Writer | bytes]] = [
            (opts["out"], _table_bytes(made, opts["out"], opts["out_format"], sep))
        ]
        if opts["report"]:
            outputs.append(
                (opts["report"], lambda f: json.dump(summary, f, indent=2, ensure_ascii=False))
            )
        write_all(outputs)
        self.stdout.write(self._line(summary, len(made.frame)))
        self._gate(gate, opts)

    def _gate(self, gate, opts):
        if gate.blocking:
            codes = ", ".join(sorted({f.code for f in gate.blocking}))
            line = (
                f"release gate: {len(gate.blocking)} blocking finding(s) ({codes}); see the report"
            )
            if opts["fail_on_block"]:
                raise CommandError(line, returncode=1)
            self.stderr.write(line)

    def _run_on_engine(self, opts, plan, name, *, tags, rng, sep, extra, secrets):
        """The release made out of core: the plan's steps an engine runs (dropping columns,
        row-wise masks, tokens, noise and PRAM, the generalization search), the release written
        by the engine and exported batch by batch.
        The source's table is never read whole: the attacks run on a sample the engine reads,
        and the conflict check against --earlier releases joins them to it by the source's row
        numbers (:func:`_earlier_out_of_core`)."""
        import shutil
        import tempfile

        from anonweb.cli.output import Writer, write_all
        from anonweb.core.engine.base import peak_memory_bytes
        from anonweb.core.engine.select import estimated_rows, in_memory_limit, make_engine
        from anonweb.core.io.export import EXPORT_FORMATS, export_parquet_file, format_for_path
        from anonweb.core.release.engine_release import make_engine_release
        from anonweb.core.release.plan import validate_plan

        for option, given in (
            ("--sheet", opts["sheet"]),
            ("--decimal ,", opts["decimal"] != "."),
        ):
            if given:
                raise CommandError(
                    f"{option} reads the table in memory: use --engine pandas, not {name}",
                    returncode=2,
                )
        fmt = (
            EXPORT_FORMATS[opts["out_format"]]
            if opts["out_format"]
            else format_for_path(opts["out"])
        )
        if fmt.name != "parquet" and fmt.sep is None:
            raise CommandError(
                f"the {name} engine writes Parquet or delimited text, not {fmt.described}",
                returncode=2,
            )
        # refused at submission: an in-memory-only step on a table past the in-memory limit
        validate_plan(
            plan,
            rows=estimated_rows(opts["path"]),
            memory_rows=in_memory_limit(opts["engine"]),
            engine=name,
        )
        target = Path(opts["out"]).resolve().parent
        if not target.is_dir():
            raise CommandError(
                f"cannot write {opts['out']}: its directory does not exist", returncode=2
            )
        work = Path(tempfile.mkdtemp(prefix=".anonweb-release-", dir=target))
        engine = None
        try:
            earlier = self._earlier_out_of_core(opts, name, work)
            engine = make_engine(name, opts["path"], memory_limit=opts["memory_limit"])
            made = make_engine_release(
                opts["path"],
                plan,
                engine=engine,
                out=work / "release.parquet",
                rng=rng,
                tags=tags,
                keep_order=opts["keep_order"],
                secrets=secrets,
                earlier=earlier,
            )
            export_parquet_file(made.path, fmt, work / "export", sep=sep)
            summary = self._summary(made.report, plan)
            summary.update(
                **extra,
                row_order=made.published["row_order"],
                published=made.published,
                gate=made.gate.to_dict(),
                lineage=made.lineage(),
                # as in memory: the public findings against the --earlier releases (none
                # given: checked against none)
                conflicts=made.conflicts.public
                if made.conflicts is not None
                else made.report["conflicts"],
                engine=made.engine,
                peak_memory_bytes=peak_memory_bytes(children=name == "spark"),
            )
            outputs: list[tuple[str, Writer | bytes | Path]] = [(opts["out"], work / "export")]
            if opts["report"]:
                outputs.append(
                    (opts["report"], lambda f: json.dump(summary, f, indent=2, ensure_ascii=False))
                )
            write_all(outputs)
        finally:
            if engine is not None:
                engine.close()
            shutil.rmtree(work, ignore_errors=True)
        self.stdout.write(self._line(summary, made.rows))
        self._gate(made.gate, opts)

    @staticmethod
    def _earlier_out_of_core(opts, name, work):
        """The ``--earlier`` release files linked to the source by DuckDB, which numbers the
        source's rows as the engine's lineage does, without reading the source or the files in
        memory (they are read into Parquet files under ``work``); the same checks and messages
        as :meth:`_earlier`. Refused (status 2) where the records cannot be linked out of core:
        a source the engines do not number (CSV), or a file publishing means of groups of
        records (solved in memory only)."""
        from anonweb.cli.reading import file_labels
        from anonweb.core.conflicts.engine_earlier import (
            check_source_ids_out_of_core,
            earlier_file_out_of_core,
        )
        from anonweb.core.conflicts.engine_linkage import NotOutOfCore
        from anonweb.core.engine.base import source_format
        from anonweb.core.engine.duckdb_engine import DuckDBEngine
        from anonweb.core.engine.select import make_engine
        from anonweb.core.io.frame import _decode_sep

        paths = _earlier_paths(opts)
        if not paths:
            return ()
        try:
            parquet = source_format(opts["path"]) == "parquet"
        except ValueError:
            parquet = False
        if not parquet:
            raise CommandError(
                f"--earlier on the {name} engine links the releases by the source's row numbers, "
                "which an engine keeps for a Parquet source only: convert the source to Parquet, "
                "or use --engine pandas",
                returncode=2,
            )
        duck = make_engine("duckdb", opts["path"], memory_limit=opts["memory_limit"])
        assert isinstance(duck, DuckDBEngine)
        try:
            check_source_ids_out_of_core(duck, opts["path"], opts["id"])
            return tuple(
                earlier_file_out_of_core(
                    duck,
                    opts["path"],
                    path,
                    label=label,
                    id_column=opts["id"],
                    folder=work,
                    sep=_decode_sep(opts["sep"]),
                    decimal=reading(opts, main=False)["decimal"],
                )
                for path, label in zip(paths, file_labels(paths), strict=True)
            )
        except NotOutOfCore as why:
            raise CommandError(
                f"{why}: use --engine pandas to check the release against it", returncode=2
            ) from None
        finally:
            duck.close()

    @staticmethod
    def _population(opts):
        """The ``--population-table`` file, read as the input is."""
        from anonweb.core.io.frame import read_table
        from anonweb.core.models.population_table import PopulationTable

        path = opts["population_table"]
        if not path:
            return None
        frame = read_table(path, sep=opts["sep"], **reading(opts, main=False))
        return PopulationTable.from_frame(frame, name=Path(path).name)

    @staticmethod
    def _earlier(opts, df, tags):
        """The ``--earlier`` release files, as the core's earlier releases (status: approved)."""
        from anonweb.cli.reading import file_labels
        from anonweb.core.conflicts.lineage import source_ids, view_from_lineage_form
        from anonweb.core.conflicts.release import EarlierRelease
        from anonweb.core.io.frame import read_table

        paths = _earlier_paths(opts)
        if not paths:
            return ()
        ids = source_ids(df, opts["id"])
        out = []
        for path, label in zip(paths, file_labels(paths), strict=True):
            view = view_from_lineage_form(
                df,
                read_table(path, sep=opts["sep"], **reading(opts, main=False)),
                label=label,
                id_column=opts["id"],
                ids=ids,
            )
            out.append(
                EarlierRelease(
                    label, "approved", None, view.frame, view.rows, view.aggregates, view.dp
                )
            )
        return tuple(out)

    def _search_plan(self, opts):
        from anonweb.core.io.frame import parse_column_list
        from anonweb.core.release.steps import Plan, Step

        qis = parse_column_list(opts["qi"])
        if not qis:
            raise CommandError("give --plan, or --qi with --hierarchy and --k", returncode=2)
        files = _pairs(opts["hierarchy"], "--hierarchy")
        missing = [q for q in qis if q not in files]
        if missing:
            raise CommandError(
                f"no --hierarchy for quasi-identifier(s): {', '.join(missing)}", returncode=2
            )
        models = self._models(opts)
        params = {
            "k": opts["k"] or 1,
            "suppression": opts["suppression"],
            "metric": opts["metric"],
            "models": models,
        }
        if opts["aggregate"] is not None:
            params["aggregate"] = opts["aggregate"]
        for key in ("max_nodes", "time_limit"):
            if opts[key] is not None:
                params[key] = opts[key]
        if opts["importance"] and not opts["local_suppression"]:
            raise CommandError("--importance goes with --local-suppression", returncode=2)
        if opts["local_suppression"]:
            params["local_suppression"] = {"importance": _importance(opts["importance"], qis)}
        return Plan(
            steps=(Step("optimal_generalization", params),),
            quasi_identifiers=tuple(qis),
            sensitive=tuple(sorted({m["sensitive"] for m in models if "sensitive" in m})),
            hierarchies={q: {"path": str(Path(files[q]).resolve())} for q in qis},
        )

    def _models(self, opts):
        return model_specs(opts)

    @staticmethod
    def _read_secret(path):
        try:
            return Path(path).read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise CommandError(
                f"cannot read secret file {path!r}: {exc.strerror}", returncode=2
            ) from None

    @staticmethod
    def _summary(report, plan):
        from anonweb.core.release.plan import plan_to_dict

        summary = {"plan": plan_to_dict(plan), **report}
        search = next((s for s in report["steps"] if s["kind"] == "optimal_generalization"), None)
        if search is not None:
            for key in (
                "levels",
                "suppressed",
                "k",
                "classes",
                "information_loss",
                "information_loss_measure",
                "metric",
                "aggregate",
                "model_checks",
                "search",
            ):
                summary[key] = search[key]
            if "local_suppression" in search:
                summary["local_suppression"] = search["local_suppression"]
        return summary

    @staticmethod
    def _line(summary, rows):
        if "levels" in summary:
            objective = summary["metric"] + (
                f", {summary['aggregate']}" if summary.get("aggregate") else ""
            )
            return (
                f"wrote {rows} rows: levels {summary['levels']}, "
                f"{summary['suppressed']} suppressed, smallest class {summary['k']}, "
                f"information loss {summary['information_loss']:.6f} ({objective})"
            )
        return f"wrote {rows} rows"


def _importance(text, qis):
    """``--importance age=1,zip=3`` as a mapping of quasi-identifiers to numbers."""
    out = {}
    for name, value in _pairs([p for p in (text or "").split(",") if p], "--importance").items():
        if name not in qis:
            raise CommandError(f"--importance: {name!r} is not a quasi-identifier", returncode=2)
        try:
            out[name] = float(value)
        except ValueError:
            raise CommandError(f"--importance: {value!r} is not a number", returncode=2) from None
    return out


def _table_bytes(made, out: str, name: str | None, sep: str) -> bytes:
    """The bytes of the released table: the format named, or the one ``out``'s suffix names
    (CSV, in the input's separator, for any other suffix)."""
    from anonweb.core.io.export import DEFAULT_FORMAT, EXPORT_FORMATS, format_for_path

    fmt = EXPORT_FORMATS[name] if name else format_for_path(out)
    return made.export_bytes(fmt.name, sep=sep if fmt.name == DEFAULT_FORMAT else None)


def _output_separator(path, sep, sniff):
    """The input's separator for a delimited input, a comma otherwise."""
    from anonweb.core.io.frame import TEXT_SUFFIXES, _decode_sep

    if sep:
        return _decode_sep(sep)
    if Path(path).suffix.lower() not in TEXT_SUFFIXES:
        return ","
    with open(path, "rb") as f:
        head = f.read(65536).decode("utf-8", errors="replace")
    return sniff(head)


def _earlier_paths(opts) -> list[str]:
    """The ``--earlier`` files, checked to come with ``--id`` (and ``--id`` with them)."""
    paths = opts["earlier"] or []
    if not paths and opts["id"]:
        raise CommandError("--id names the id column of --earlier files", returncode=2)
    if paths and not opts["id"]:
        raise CommandError(
            "--earlier needs --id, the source's record id column the files carry", returncode=2
        )
    return list(paths)
