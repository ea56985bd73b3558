"""Two releases of one source side by side: their plans parameter by parameter, the risk after,
the information loss, the differential-privacy spending and the release gate's findings.

Nothing here measures anything: every figure is read from the reports the releases stored when
they were made (the risk builders', the search's, the plan runner's), so a comparison can never
disagree with the release pages. Which report is read (internal or published) is the caller's
decision; given two published reports the comparison holds only public figures.

Steps are aligned by kind (and, for statistics, by the columns they describe) with
:class:`difflib.SequenceMatcher`, so a step inserted in one plan shows as one step missing on the
other side instead of shifting every later step.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anonweb.core.assessment.profile import BUILT_IN
from anonweb.core.models.registry import sensitive_figures

HIGHER = "higher"
LOWER = "lower"
NEARER_ZERO = "nearer zero"

# risk_after key -> (label, which direction is safer)
RISK_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("rows", "Released rows", None),
    ("k", "k (smallest class)", HIGHER),
    ("classes", "Classes", None),
    ("suppressed", "Records suppressed (outside every class)", None),
    ("uniques", "Unique records", LOWER),
    ("prosecutor_risk.max", "Highest prosecutor risk", LOWER),
    ("prosecutor_risk.mean", "Average prosecutor risk", LOWER),
    ("journalist_risk.max", "Highest journalist risk", LOWER),
    ("journalist_risk.mean", "Average journalist risk", LOWER),
    ("marketer_risk", "Marketer risk", LOWER),
)
# each sensitive column's figures besides the privacy models' (which the registry declares)
HOMOGENEITY_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("homogeneous_classes", "classes sharing one value", LOWER),
    ("homogeneous_records", "records in classes sharing one value", LOWER),
)
HOMOGENEITY_KEYS = frozenset(key for key, _label, _safer in HOMOGENEITY_FIELDS)


def sensitive_fields() -> tuple[tuple[str, str, str | None], ...]:
    """A sensitive column's figures: every registry model's, then the homogeneity counts."""
    models = tuple((f.key, f.label, f.safer) for _cls, f in sensitive_figures())
    return models + HOMOGENEITY_FIELDS


# as the models registered when this module was loaded declare them
SENSITIVE_FIELDS = sensitive_fields()
SEARCH_KINDS = ("optimal_generalization", "generalize", "mondrian")
LOSS_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("information_loss", "Information loss", LOWER),
    ("information_loss_measure", "Its measure", None),
    ("metric", "Metric", None),
    ("aggregate", "Aggregated by", None),
    ("suppressed", "Records suppressed by the search", LOWER),
    ("k", "k reached", HIGHER),
    ("classes", "Classes", None),
    ("search.algorithm", "Search", None),
)
DP_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("kind", "statistic", None),
    ("columns", "columns", None),
    ("epsilon_spent", "ε spent", LOWER),
    ("delta_spent", "δ spent", LOWER),
    ("privacy_cost.local_epsilon", "local ε per record", LOWER),
    ("noise.mechanism", "noise", None),
    ("noise.scale", "noise scale", LOWER),
    ("ci95_halfwidth", "95% of values within ±", LOWER),
    ("rows_out", "rows released", None),
    ("suppressed_keys", "categories selected privately", None),
    ("unit_of_privacy.person", "privacy unit", None),
)
# utility column figure -> (label, which direction is more useful)
UTILITY_COLUMN_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("information_loss", "information loss", LOWER),
    ("tvd", "distance from the source's distribution (TVD)", LOWER),
    ("changed_share", "share of cells changed", LOWER),
    ("suppressed_share", "share of cells suppressed (*)", LOWER),
    ("mean_shift", "shift of the mean", NEARER_ZERO),
    ("std_shift", "shift of the standard deviation", NEARER_ZERO),
)
UTILITY_DP_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("label", "statistic", None),
    ("value", "released value", None),
    ("ci95_halfwidth", "95% interval ±", LOWER),
    ("exact_in_interval", "source value inside the interval", None),
)
COST_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("epsilon", "ε spent (central)", LOWER),
    ("delta", "δ spent", LOWER),
    ("local_epsilon", "local ε per record", LOWER),
)


@dataclass(frozen=True)
class Row:
    """One parameter or figure of both releases. ``a``/``b`` are the stored JSON values (None:
    absent on that side); ``better`` names the safer or more useful side when the figure has a
    known direction and the two differ."""

    label: str
    a: Any
    b: Any
    differs: bool
    better: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "a": self.a,
            "b": self.b,
            "differs": self.differs,
            "better": self.better,
        }


@dataclass(frozen=True)
class Comparison:
    plan: tuple[Row, ...]
    risk: tuple[Row, ...]
    loss: tuple[Row, ...]
    dp: tuple[Row, ...]
    findings: tuple[Row, ...]
    utility: tuple[Row, ...] = ()

    @property
    def sections(self) -> dict[str, tuple[Row, ...]]:
        return {
            "plan": self.plan,
            "risk": self.risk,
            "loss": self.loss,
            "utility": self.utility,
            "dp": self.dp,
            "findings": self.findings,
        }

    @property
    def differences(self) -> int:
        return sum(r.differs for rows in self.sections.values() for r in rows)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: [r.to_dict() for r in v] for k, v in self.sections.items()}
        out["differences"] = self.differences
        return out


def same(a: Any, b: Any) -> bool:
    """Equal as stored, floats within a relative 1e-9 (a JSON round trip may move the last bit)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def row(label: str, a: Any, b: Any, direction: str | None = None) -> Row:
    differs = not same(a, b)
    better = None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if differs and direction == NEARER_ZERO and numbers:
        better = "a" if abs(a) < abs(b) else "b" if abs(b) < abs(a) else None
    elif differs and direction and numbers:
        better = "a" if (a > b) == (direction == HIGHER) else "b"
    return Row(label=label, a=a, b=b, differs=differs, better=better)


def get(doc: Any, path: str) -> Any:
    """``doc["x"]["y"]`` for ``"x.y"``; None where any part is missing."""
    for part in path.split("."):
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """Nested parameters as ``{"levels.age": 2, ...}``; lists of plain values stay one value
    (a column list is read as one parameter), lists of objects are numbered."""
    if isinstance(doc, Mapping):
        out: dict[str, Any] = {}
        for key, value in doc.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out if out or not prefix else {prefix: {}}
    if isinstance(doc, list) and any(isinstance(v, Mapping | list) for v in doc):
        out = {}
        for i, value in enumerate(doc, 1):
            out.update(flatten(value, f"{prefix}[{i}]"))
        return out if out else {prefix: []}
    return {prefix: doc}


def _merged_keys(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Keys of ``a`` in order, then those only in ``b``."""
    keys = list(a)
    seen = set(keys)
    return keys + [k for k in b if k not in seen]


def param_rows(label: str, a: Any, b: Any) -> list[Row]:
    flat_a, flat_b = flatten(a), flatten(b)
    return [
        row(f"{label} · {key}" if key else label, flat_a.get(key), flat_b.get(key))
        for key in _merged_keys(flat_a, flat_b)
    ]


def align(
    a: Sequence[Any], b: Sequence[Any], key: Callable[[Any], Hashable]
) -> list[tuple[int | None, int | None]]:
    """Index pairs of ``a`` and ``b`` matched by ``key`` (None: no counterpart)."""
    matcher = difflib.SequenceMatcher(None, [key(x) for x in a], [key(x) for x in b], False)
    pairs: list[tuple[int | None, int | None]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        # a replaced run: pair what lines up, the rest has no counterpart
        common = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        pairs.extend(zip(range(i1, i1 + common), range(j1, j1 + common), strict=True))
        pairs.extend((i, None) for i in range(i1 + common, i2))
        pairs.extend((None, j) for j in range(j1 + common, j2))
    return pairs


def _step_label(i: int | None, j: int | None, kind_a: Any, kind_b: Any) -> str:
    numbers = [str(n + 1) for n in (i, j) if n is not None]
    number = numbers[0] if len(set(numbers)) == 1 else "/".join(numbers)
    kind = kind_a if kind_a is not None else kind_b
    return f"Step {number} ({kind})"


def compare_plans(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Row, ...]:
    """The plans' parameters: the top-level ones (quasi-identifiers, hierarchies, ...) then each
    step's kind and parameters, steps aligned by kind."""
    rows: list[Row] = []
    for key in _merged_keys((k for k in a if k != "steps"), (k for k in b if k != "steps")):
        rows += param_rows(key.replace("_", " ").capitalize(), a.get(key), b.get(key))
    steps_a, steps_b = list(a.get("steps") or []), list(b.get("steps") or [])
    for i, j in align(steps_a, steps_b, key=lambda s: get(s, "kind")):
        sa = steps_a[i] if i is not None else None
        sb = steps_b[j] if j is not None else None
        kind_a, kind_b = get(sa, "kind"), get(sb, "kind")
        label = _step_label(i, j, kind_a, kind_b)
        rows.append(row(label, kind_a, kind_b))
        rows += param_rows(label, get(sa, "params") or {}, get(sb, "params") or {})
    return tuple(rows)


def _risk_rows(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[Row]:
    if not a and not b:
        return []
    a, b = a or {}, b or {}
    rows = [row("Quasi-identifiers", get(a, "quasi_identifiers"), get(b, "quasi_identifiers"))]
    rows += [row(label, get(a, key), get(b, key), d) for key, label, d in RISK_FIELDS]
    at_risk_a, at_risk_b = get(a, "records_at_risk") or {}, get(b, "records_at_risk") or {}
    thresholds = sorted(_merged_keys(at_risk_a, at_risk_b), key=_as_number)
    rows += [
        row(
            f"Records with prosecutor risk above {t}",
            get(at_risk_a.get(t), "count"),
            get(at_risk_b.get(t), "count"),
            LOWER,
        )
        for t in thresholds
    ]
    sens_a, sens_b = get(a, "sensitive") or {}, get(b, "sensitive") or {}
    for name in _merged_keys(sens_a, sens_b):
        a_sens, b_sens = sens_a.get(name) or {}, sens_b.get(name) or {}
        rows += [
            row(f"{name}: {label}", get(a_sens, key), get(b_sens, key), d)
            for key, label, d in sensitive_fields()
            # a figure neither report holds (one measured only since) is left out
            if key in BUILT_IN or key in HOMOGENEITY_KEYS or key in a_sens or key in b_sens
        ]
    return rows


def _as_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf


def _search_step(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for step in report.get("steps") or []:
        if isinstance(step, Mapping) and step.get("kind") in SEARCH_KINDS:
            return step
    return None


def _loss_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    """What the search (or the fixed levels) gave up: levels, suppression, information loss
    overall and per quasi-identifier, as the step reported them."""
    sa, sb = _search_step(a), _search_step(b)
    if sa is None and sb is None:
        return []
    levels_a, levels_b = get(sa, "levels") or {}, get(sb, "levels") or {}
    rows = [
        row(f"Level of {q}", levels_a.get(q), levels_b.get(q))
        for q in _merged_keys(levels_a, levels_b)
    ]
    rows += [row(label, get(sa, key), get(sb, key), d) for key, label, d in LOSS_FIELDS]
    per_a, per_b = get(sa, "loss_per_qi") or {}, get(sb, "loss_per_qi") or {}
    rows += [
        row(f"Information loss of {q}", per_a.get(q), per_b.get(q), LOWER)
        for q in _merged_keys(per_a, per_b)
    ]
    return [r for r in rows if r.a is not None or r.b is not None]


def _dp_steps(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        s for s in report.get("steps") or [] if isinstance(s, Mapping) and s.get("privacy_cost")
    ]


def _dp_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    """The privacy spent and each statistic released, matched by kind and columns."""
    steps_a, steps_b = _dp_steps(a), _dp_steps(b)
    cost_a, cost_b = a.get("privacy_cost") or {}, b.get("privacy_cost") or {}
    rows = [
        row(label, cost_a.get(key), cost_b.get(key), d)
        for key, label, d in COST_FIELDS
        if cost_a.get(key) or cost_b.get(key)
    ]
    if not steps_a and not steps_b:
        return rows

    def key(step: Mapping[str, Any]) -> Hashable:
        return (step.get("kind"), tuple(step.get("columns") or ()))

    for n, (i, j) in enumerate(align(steps_a, steps_b, key=key), 1):
        sa = steps_a[i] if i is not None else None
        sb = steps_b[j] if j is not None else None
        for field, label, d in DP_FIELDS:
            va, vb = get(sa, field), get(sb, field)
            if va is not None or vb is not None:
                rows.append(row(f"Statistic {n}: {label}", va, vb, d))
    return rows


def compare_findings(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]
) -> tuple[Row, ...]:
    """The gate's findings by code and columns: severity and records on each side."""

    def by_key(findings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in findings:
            columns = ", ".join(str(c) for c in f.get("columns") or [])
            label = f"{f.get('code')}" + (f" ({columns})" if columns else "")
            records = f.get("records")
            text = str(f.get("severity", ""))
            if records is not None:
                text += f": {records} record{'s' if records != 1 else ''}"
            out[label] = text
        return out

    fa, fb = by_key(a), by_key(b)
    rows = [row("Blocking findings", _blocking(a), _blocking(b), LOWER)]
    rows += [row(label, fa.get(label), fb.get(label)) for label in _merged_keys(fa, fb)]
    return tuple(rows)


def _blocking(findings: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for f in findings if f.get("severity") == "block")


def compare_utility(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> tuple[Row, ...]:
    """Two stored utilities (:func:`anonweb.core.utility.measures.release_utility`'s
    ``to_dict()``) side by side: per column the distance from the source, the cells changed and
    suppressed, the information loss and the moments' shifts; each DP figure's interval. These
    are measured on the source: internal."""
    if not a and not b:
        return ()
    a, b = a or {}, b or {}
    rows = [
        row("Records suppressed", a.get("records_suppressed"), b.get("records_suppressed"), LOWER),
        row(
            "Information loss over the quasi-identifiers",
            get(a, "information_loss.aggregate_value"),
            get(b, "information_loss.aggregate_value"),
            LOWER,
        ),
    ]
    cols_a = {str(c.get("column")): c for c in a.get("columns") or [] if isinstance(c, Mapping)}
    cols_b = {str(c.get("column")): c for c in b.get("columns") or [] if isinstance(c, Mapping)}
    for name in _merged_keys(cols_a, cols_b):
        rows += [
            row(f"{name}: {label}", get(cols_a.get(name), key), get(cols_b.get(name), key), d)
            for key, label, d in UTILITY_COLUMN_FIELDS
        ]
    dp_a = [s for s in a.get("dp") or [] if isinstance(s, Mapping)]
    dp_b = [s for s in b.get("dp") or [] if isinstance(s, Mapping)]

    def key(stat: Mapping[str, Any]) -> Hashable:
        return (stat.get("kind"), tuple(stat.get("columns") or ()), stat.get("label"))

    for n, (i, j) in enumerate(align(dp_a, dp_b, key=key), 1):
        sa = dp_a[i] if i is not None else None
        sb = dp_b[j] if j is not None else None
        rows += [
            row(f"DP figure {n}: {label}", get(sa, field), get(sb, field), d)
            for field, label, d in UTILITY_DP_FIELDS
        ]
    return tuple(r for r in rows if r.a is not None or r.b is not None)


def compare_releases(
    *,
    plan_a: Mapping[str, Any],
    plan_b: Mapping[str, Any],
    report_a: Mapping[str, Any],
    report_b: Mapping[str, Any],
    findings_a: Sequence[Mapping[str, Any]] | None = None,
    findings_b: Sequence[Mapping[str, Any]] | None = None,
    utility_a: Mapping[str, Any] | None = None,
    utility_b: Mapping[str, Any] | None = None,
) -> Comparison:
    """Both releases' parameters and stored figures, row by row, differences flagged. Without
    findings or utilities (an analyst's comparison) those sections are empty."""
    findings = (
        compare_findings(findings_a or [], findings_b or [])
        if findings_a is not None or findings_b is not None
        else ()
    )
    return Comparison(
        plan=compare_plans(plan_a or {}, plan_b or {}),
        risk=tuple(_risk_rows(report_a.get("risk_after"), report_b.get("risk_after"))),
        loss=tuple(_loss_rows(report_a, report_b)),
        dp=tuple(_dp_rows(report_a, report_b)),
        findings=findings,
        utility=compare_utility(utility_a, utility_b),
    )
