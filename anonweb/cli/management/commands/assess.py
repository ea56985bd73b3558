"""``manage.py assess``: the disclosure-risk profile of a table, as text or JSON.

The privacy-model flags of ``anonymize`` (``--l-distinct SA=L``, ``--beta-likeness SA=B``, ...,
one per flag of the model registry) check those models on the table as it is: the JSON gains
``model_checks`` (each model's ``satisfied``, table figure and failing classes and records).

``--weights COL``, ``--household COL``, ``--suda2 [--suda2-max-size N]`` add sdcMicro's risk
measures for survey microdata: ``individual_risk`` (Benedetti-Franconi with the survey weights;
without ``--weights`` every weight is 1), ``household_risk`` and ``suda2``; ``--records FILE``
writes them per record (row number from 1, individual risk, household risk, SUDA scores).

pandas and the core are imported inside ``handle`` so that ``--help`` and argument errors stay
fast and the command never pulls in Celery or plotting.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from anonweb.cli.model_flags import add_model_flags, model_specs
from anonweb.cli.reading import add_engine_options, add_reading_options, reading


class Command(BaseCommand):
    help = "Measure the re-identification risk and attribute disclosure of a table."
    # The system checks import every URLconf and view (and pandas with them): not needed to
    # read one file, and they would triple the start-up time.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="CSV/TSV, Excel or Parquet file")
        parser.add_argument("--qi", default="", help="quasi-identifiers, comma separated")
        parser.add_argument("--sensitive", default="", help="sensitive attributes, comma separated")
        parser.add_argument("--sep", default=None, help="field separator (default: sniffed)")
        add_reading_options(parser)
        parser.add_argument(
            "--hierarchy",
            action="append",
            default=[],
            metavar="COL=FILE",
            help="value hierarchy (ARX CSV) for a sensitive column; repeatable",
        )
        parser.add_argument(
            "--known",
            default="",
            help="columns an attacker knows (linkage attack on the table itself)",
        )
        parser.add_argument("--aux", default=None, help="auxiliary table for a linkage attack")
        parser.add_argument("--aux-keys", default="", help="columns joining --aux to the table")
        parser.add_argument("--population", default=None, help="population size N")
        parser.add_argument(
            "--population-table",
            default=None,
            metavar="FILE",
            help="the population the table was drawn from (with the quasi-identifiers): exact "
            "journalist and marketer risk, and the table for --k-map and --delta-presence",
        )
        parser.add_argument("--format", choices=("text", "json"), default="text")
        parser.add_argument(
            "--weights", default=None, metavar="COL", help="survey-weight column (individual risk)"
        )
        parser.add_argument(
            "--household", default=None, metavar="COL", help="household-id column (household risk)"
        )
        parser.add_argument(
            "--risk-method",
            choices=("approx", "exact"),
            default=None,
            help="individual risk of keys of more than two records: sdcMicro's approximation "
            "(default) or its exact series",
        )
        parser.add_argument(
            "--suda2", action="store_true", help="minimal sample uniques and SUDA scores"
        )
        parser.add_argument(
            "--suda2-max-size",
            default=None,
            metavar="N",
            help="largest MSU searched by --suda2 (default 3)",
        )
        parser.add_argument(
            "--records",
            default=None,
            metavar="FILE",
            help="write a CSV of row number, individual risk, household risk and SUDA score",
        )
        add_model_flags(parser)
        add_engine_options(parser)

    def handle(self, *args, **options) -> None:
        from anonweb.core.errors import CoreError

        try:
            result = self._assess(options)
        except CoreError as exc:
            # One line a privacy officer can act on; exit status 2 like other usage errors.
            raise CommandError(" ".join(str(exc).split()), returncode=2) from None
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False))
        else:
            self.stdout.write(render_text(result))

    def _assess(self, options) -> dict:
        from anonweb.core.assessment.profile import assess_histogram
        from anonweb.core.engine.base import peak_memory_bytes
        from anonweb.core.engine.select import choose_engine, make_engine
        from anonweb.core.errors import ParameterError
        from anonweb.core.io.frame import parse_column_list, read_table
        from anonweb.core.io.hierarchy import read_hierarchy
        from anonweb.core.risk.linkage import linkage_histogram

        qis = parse_column_list(options["qi"])
        if not qis:
            raise ParameterError("no quasi-identifier given: use --qi COL,COL")
        if options["aux_keys"] and not options["aux"]:
            raise ParameterError("--aux-keys needs --aux (the auxiliary table to join)")
        if options["known"] and options["aux"]:
            raise ParameterError("give either --known or --aux, not both")
        sensitive = parse_column_list(options["sensitive"])
        hierarchies = {}
        for spec in options["hierarchy"]:
            col, sep, path = spec.partition("=")
            if not sep or not col.strip() or not path.strip():
                raise ParameterError(f"--hierarchy expects COL=FILE, got {spec!r}")
            col = col.strip()
            if col not in sensitive:
                raise ParameterError(f"--hierarchy for {col!r}, which is not a --sensitive column")
            hierarchies[col] = read_hierarchy(path.strip(), attribute=col)
        engine_name = choose_engine(options["engine"], options["path"])
        if engine_name != "pandas" and (options["aux"] or options["known"]):
            raise ParameterError(
                f"the linkage attack (--known, --aux) reads the table in memory: "
                f"use --engine pandas, not {engine_name}"
            )
        df = None
        if engine_name == "pandas":
            df = read_table(options["path"], sep=options["sep"], **reading(options))
        engine = make_engine(engine_name, options["path"], memory_limit=options["memory_limit"])
        try:
            hist = engine.histogram(options["path"] if df is None else df, qis, sensitive)
        finally:
            engine.close()
        for col, h in hierarchies.items():
            h.validate_covers(hist.column(col))
        population = _population(options["population"], hist.rows)
        profile = assess_histogram(hist, hierarchies=hierarchies, population_size=population)
        result = profile.to_dict()
        result["file"] = str(options["path"])
        specs = model_specs(options)
        people = _population_table(options)
        if (specs or people is not None) and df is None:
            raise ParameterError(
                f"the model checks and a population table read the table in memory: use "
                f"--engine pandas, not {engine.name}"
            )
        if people is not None:
            result["population_table"] = _population_figures(df, qis, people)
        if specs:
            result["model_checks"] = _model_checks(df, qis, specs, hierarchies, people)
        result["engine"] = engine.name
        if _wants_survey(options):
            if df is None:
                raise ParameterError(
                    f"individual risk and SUDA2 read the table in memory: use --engine pandas, "
                    f"not {engine.name}"
                )
            survey = _survey(df, qis, options)
            result.update(survey.to_dict())
            if options["records"]:
                _write_records(survey, options["records"])
        if options["aux"]:
            aux = read_table(options["aux"], sep=options["sep"], **reading(options, main=False))
            keys = parse_column_list(options["aux_keys"]) or None
            result["linkage"] = linkage_histogram(df, aux=aux, on=keys).to_dict()
        elif options["known"]:
            known = parse_column_list(options["known"])
            result["linkage"] = linkage_histogram(df, known=known).to_dict()
        result["peak_memory_bytes"] = peak_memory_bytes(children=engine_name == "spark")
        return result


def _wants_survey(options) -> bool:
    from anonweb.core.errors import ParameterError

    if options["suda2_max_size"] is not None and not options["suda2"]:
        raise ParameterError("--suda2-max-size needs --suda2")
    return bool(
        options["weights"]
        or options["household"]
        or options["suda2"]
        or options["records"]
        or options["risk_method"]
    )


def _write_records(survey, path: str) -> None:
    from anonweb.core.errors import DataError

    try:
        survey.records().to_csv(path, index=False)
    except OSError as exc:
        raise DataError(f"cannot write --records file {path}: {exc.strerror or exc}") from None


def _survey(df, qis, options):
    """sdcMicro's survey risk measures (individual, household, SUDA2), each as the core
    defines it."""
    from anonweb.core.assessment.survey import survey_risk
    from anonweb.core.errors import ParameterError

    size = None
    raw = options["suda2_max_size"]
    if raw is not None:
        try:
            size = int(raw)
        except ValueError:
            raise ParameterError(
                f"--suda2-max-size expects a whole number of columns, got {raw!r}"
            ) from None
    return survey_risk(
        df,
        quasi_identifiers=qis,
        weights=options["weights"],
        household=options["household"],
        with_suda2=options["suda2"],
        suda2_max_size=size,
        method=options["risk_method"] or "approx",
    )


def _model_checks(df, qis, specs, hierarchies, people=None) -> list[dict]:
    """The asked-for models checked on the table's classes, each by its own check; those
    that read a population table (k-map, δ-presence) against ``people``, class by class on
    the values as they are."""
    from anonweb.core.models import class_data, model_from_dict
    from anonweb.core.risk.classes import equivalence_classes
    from anonweb.core.risk.reidentification import population_class_sizes

    models = [model_from_dict(spec, hierarchies).with_population(people) for spec in specs]
    sensitive = sorted({m.sensitive for m in models if m.sensitive is not None})
    ec = equivalence_classes(df, quasi_identifiers=qis)

    def per_row(population):
        return population_class_sizes(df, ec, population.frame, strict=True)[ec.codes]

    data = class_data(
        df,
        quasi_identifiers=qis,
        sensitive=sensitive,
        population=per_row if people is not None else None,
    )
    return [m.check(data).to_dict() for m in models]


def _population_table(options):
    from anonweb.core.io.frame import read_table
    from anonweb.core.models.population_table import PopulationTable

    path = options["population_table"]
    if not path:
        return None
    frame = read_table(path, sep=options["sep"], **reading(options, main=False))
    return PopulationTable.from_frame(frame, name=Path(path).name)


def _population_figures(df, qis, people) -> dict:
    """The population used, and the journalist and marketer risk counted in it (exact, where
    ``--population`` gives estimates)."""
    from anonweb.core.risk.classes import equivalence_classes
    from anonweb.core.risk.reidentification import population_class_sizes, risk_of

    ec = equivalence_classes(df, quasi_identifiers=qis)
    sizes = population_class_sizes(df, ec, people.frame, strict=True)
    risk = risk_of(ec, population_sizes=sizes).to_dict()
    return {
        **people.describe(),
        "journalist_risk": risk["journalist_risk"],
        "marketer_risk": risk["marketer_risk"],
    }


def _population(raw: str | None, rows: int) -> int | None:
    from anonweb.core.errors import ParameterError

    if raw is None:
        return None
    try:
        value = int(raw.replace("_", "").replace(",", ""))
    except ValueError:
        raise ParameterError(
            f"--population expects a whole number of people, got {raw!r}"
        ) from None
    if value < rows:
        raise ParameterError(f"--population {value} is smaller than the table ({rows} rows)")
    return value


def _registry_figures() -> list[tuple[str, str]]:
    """The registry's figures the lines above do not already show."""
    from anonweb.core.assessment.profile import BUILT_IN
    from anonweb.core.models.registry import sensitive_figures

    return [(f.key, f.label) for _cls, f in sensitive_figures() if f.key not in BUILT_IN]


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def render_text(r: dict) -> str:
    """A readable report of ``RiskProfile.to_dict()`` (plus the optional linkage section)."""
    lines = [
        f"{r['file']}: {r['rows']} rows, quasi-identifiers: {', '.join(r['quasi_identifiers'])}",
        f"  equivalence classes: {r['classes']}   k = {r['k']}   uniques: {r['uniques']}",
        f"  prosecutor risk: max {_pct(r['prosecutor_risk']['max'])}, "
        f"mean {_pct(r['prosecutor_risk']['mean'])}   marketer risk: {_pct(r['marketer_risk'])}",
        f"  journalist risk: max {_pct(r['journalist_risk']['max'])}, "
        f"mean {_pct(r['journalist_risk']['mean'])} ({r['journalist_risk']['source']})",
        "  records at risk:",
    ]
    for t, v in r["records_at_risk"].items():
        lines.append(f"    risk > {_pct(float(t)):>7}: {v['count']} records ({_pct(v['share'])})")
    pop = r.get("population")
    if pop:
        lines.append(
            f"  population {pop['population_size']}: estimated population uniques "
            f"{pop['population_uniques']:.0f} ({_pct(pop['population_uniqueness'])}) "
            f"by {pop['model']} ({pop['reference']})"
        )
        if pop.get("disagreement"):
            lines.append(f"    {pop['disagreement']['explanation']}")
    for name, s in r["sensitive"].items():
        delta = "inf" if s["delta_disclosure"] is None else f"{s['delta_disclosure']:.4f}"
        lines += [
            f"  sensitive {name}: distinct l = {s['l_distinct']}, entropy l = {s['l_entropy']:.4f}, "
            f"recursive ({s['recursive_c']:g},l) l = {s['l_recursive']}, δ = {delta}",
            f"    t = {s['t_closeness']:.4f} ({s['t_distance']} distance); "
            f"{s['homogeneous_classes']} classes ({s['homogeneous_records']} records) "
            "disclose their value outright",
        ]
        for key, label in _registry_figures():
            if key in s:
                value = "inf" if s[key] is None else f"{s[key]:.4g}"
                lines.append(f"    {label} = {value}")
        for c in s["disclosing_classes"][:5]:
            qi = ", ".join(f"{k}={v}" for k, v in c["quasi_identifiers"].items())
            lines.append(f"      {qi} ({c['size']} records): {name} = {c['value']}")
    for check in r.get("model_checks", []):
        state = "satisfied" if check["satisfied"] else "NOT satisfied"
        value = f"{check['value']:.4g}" if check["value"] is not None else "inf"
        lines.append(
            f"  {check['description']}: {state} (table figure {value}; "
            f"{check['failing_records']} records in {check['failing_classes']} classes fail)"
        )
    ind = r.get("individual_risk")
    if ind:
        above = ", ".join(f"> {_pct(float(t))}: {n}" for t, n in ind["records_above"].items())
        lines.append(
            f"  individual risk ({ind['weights']}): global {_pct(ind['global'])}, expected "
            f"re-identifications {ind['expected_reidentifications']:.2f}; records {above}"
        )
    hh = r.get("household_risk")
    if hh:
        above = ", ".join(f"> {_pct(float(t))}: {n}" for t, n in hh["households_above"].items())
        lines.append(
            f"  household risk: max {_pct(hh['max'])} over {hh['households']} households; "
            f"households {above}"
        )
    su = r.get("suda2")
    if su:
        sizes = ", ".join(f"size {s}: {n}" for s, n in su["msu_counts"].items())
        lines.append(
            f"  SUDA2 (MSUs up to {su['max_size']} columns): {sizes}; "
            f"{su['records_with_msu']} records with an MSU, max score {su['max_score']:g}, "
            f"max DIS-SUDA {su['dis_suda_max']:.4f}"
        )
    link = r.get("linkage")
    if link:
        lines.append(
            f"  linkage on {', '.join(link['columns'])}: {link['singled_out']} of "
            f"{link['targets']} {'auxiliary ' if link['mode'] != 'known' else ''}records singled out, "
            f"{link['unmatched']} unmatched"
        )
        for h in link["histogram"][:10]:
            lines.append(f"    {h['candidates']:>5} candidates: {h['records']} records")
    return "\n".join(lines)
