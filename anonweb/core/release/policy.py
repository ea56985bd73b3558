"""The release policy: one function that every path (web job, API, command line) calls on a
release before it can be approved, returning :class:`~anonweb.core.findings.Finding` objects.

:func:`evaluate_release` looks at what a release would publish, given the source, the plan, the
dataset's column tags and the team's :class:`PolicyThresholds`:

* a column tagged ``identifier`` that goes out unchanged (``identifier_released``) or only partly
  masked (``identifier_partly_masked``; the part kept counts as a quasi-identifier below);
* a text column with mostly distinct or long values going out verbatim (``free_text``) unless
  tagged ``keep`` ("keep as is", an explicit decision), and any released column never tagged
  (``column_untagged``);
* the risk after, measured on the tagged quasi-identifiers together with the plan's (and the
  partly masked identifiers), with the privacy-model objects of :mod:`anonweb.core.models`:
  k-anonymity (``risk_k``), distinct l-diversity of each sensitive column (``risk_l``; l = 2
  means no class discloses its value), t-closeness if the team sets a t (``risk_t``) and the
  largest prosecutor risk (``risk_prosecutor``), and every other model of the team's policy
  (``risk_model``; the policy is a list of model specs, see :class:`PolicyThresholds`); with no
  quasi-identifier anywhere, a record-level release is blocked (``no_quasi_identifiers``);
* conflicts with earlier releases, as found by :func:`anonweb.core.conflicts.check.check_conflicts`
  and turned into findings by :func:`anonweb.core.conflicts.gate.conflict_findings`;
* a differentially private release whose published report would carry exact figures of the
  source (``dp_exact_figures``).

Every finding names columns and counts records; none holds a cell value.

:func:`evaluate_plan` gives, while a plan is being written, the findings that the plan and the
tags alone decide (the same :class:`Finding` objects, made by the same functions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.attacks.gate import attack_findings
from anonweb.core.conflicts.check import ConflictReport
from anonweb.core.conflicts.gate import conflict_findings
from anonweb.core.errors import CoreError, ParameterError
from anonweb.core.findings import BLOCK, WARN, Finding
from anonweb.core.models import KAnonymity, class_data
from anonweb.core.models.base import PrivacyModel, require_int, require_number
from anonweb.core.models.registry import model_class, model_from_dict
from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.report import internal_step_keys
from anonweb.core.release.steps import Plan
from anonweb.core.risk.classes import SUPPRESSED, suppressed_records
from anonweb.core.transforms.local_suppression import na_matching_counts

# Column roles as the datasets app stores them; "keep" is the explicit "keep as is".
IDENTIFIER, QUASI_IDENTIFIER, SENSITIVE, OTHER, KEEP = (
    "identifier",
    "quasi_identifier",
    "sensitive",
    "other",
    "keep",
)
ROLES = (IDENTIFIER, QUASI_IDENTIFIER, SENSITIVE, OTHER, KEEP)
# Steps that replace an identifier by a pseudonym unrelated to its digits (keyed tokens, a
# codebook): the result is not "partly masked".
PSEUDONYMS = {"tokenize", "substitute"}
# Free text: a text column whose non-missing values are mostly distinct, or long.
FREE_TEXT_DISTINCT = 0.5
FREE_TEXT_MIN_ROWS = 20
FREE_TEXT_LENGTH = 60  # mean characters
# A column is "unchanged" when at least this share of its released values occur in the source.
UNCHANGED_SHARE = 0.5
# Report keys describing the source itself: a DP release must not publish them.
SOURCE_KEYS = ("rows_in", "risk_before", "risk_after", "utility", "source")


# a placeholder column to check a policy spec that names none (it applies to every sensitive one)
_ANY_COLUMN = "(every sensitive column)"


def policy_spec_check(spec: object) -> dict[str, Any]:
    """One model of a team policy, checked through the registry: a plan's ``models`` entry
    whose ``sensitive`` may be left out (the model then applies to every sensitive column)."""
    if not isinstance(spec, Mapping):
        raise ParameterError(f"a policy model is an object like a plan's, got {spec!r}")
    cls = model_class(spec.get("model"))
    if not cls.policy_threshold:
        raise ParameterError(
            f"{cls.kind} cannot be a team-policy threshold: it needs a population table, "
            "which a plan's search names"
        )
    filled = dict(spec)
    if "sensitive" in cls.fields and "sensitive" not in filled:
        filled["sensitive"] = _ANY_COLUMN
    # judged with no population table: a k-map without a population size is refused here
    model_from_dict(filled).with_population(None)
    return dict(spec)


def policy_models(spec: Mapping[str, Any], sensitive: Sequence[str]) -> list[PrivacyModel]:
    """The models a policy spec asks for on a release with these sensitive columns."""
    cls = model_class(spec.get("model"))
    if "sensitive" not in cls.fields:
        return [model_from_dict(spec)]
    columns = [spec["sensitive"]] if "sensitive" in spec else list(sensitive)
    return [model_from_dict({**spec, "sensitive": s}) for s in columns if s in sensitive]


@dataclass(frozen=True)
class PolicyThresholds:
    """The team's release policy: what the risk after must satisfy.

    ``models`` is the policy's list of privacy models, as a plan's ``models`` entries
    (``[{"model": "k_anonymity", "k": 5}, {"model": "distinct_l", "l": 2}, {"model":
    "beta_likeness", "beta": 1.0}]``); a spec without ``sensitive`` applies to every sensitive
    column. Without it, the list is made of ``k``, ``l`` and ``t``; with it, ``k``, ``l`` and
    ``t`` are read from it (1, 1 and None when it has no such model), so the conflict check and
    the older readers of those three see the same policy.
    """

    k: int = 5
    l: int = 2  # noqa: E741  (the literature's letter; 2: no class discloses its value)
    t: float | None = None
    max_prosecutor_risk: float = 0.2
    # Caps on the attack figures (None: not checked): the excess success of linkage,
    # inference and singling out over the control, and the AUC of membership inference.
    max_attack_excess: float | None = None
    max_membership_auc: float | None = None
    models: tuple[Mapping[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        if self.models is None:
            legacy: list[dict[str, Any]] = [
                {"model": "k_anonymity", "k": self.k},
                {"model": "distinct_l", "l": self.l},
            ]
            if self.t is not None:
                legacy.append({"model": "t_closeness", "t": self.t})
            object.__setattr__(self, "models", tuple(legacy))
        else:
            if isinstance(self.models, str | bytes | Mapping):
                raise ParameterError("the policy's models are a list of model specs")
            specs = tuple(policy_spec_check(s) for s in self.models)
            object.__setattr__(self, "models", specs)
            found = {s["model"]: s for s in specs}
            object.__setattr__(self, "k", found.get("k_anonymity", {}).get("k", 1))
            object.__setattr__(self, "l", found.get("distinct_l", {}).get("l", 1))
            object.__setattr__(self, "t", found.get("t_closeness", {}).get("t"))
        object.__setattr__(self, "k", require_int(self.k, "the policy's k", minimum=1))
        object.__setattr__(self, "l", require_int(self.l, "the policy's l", minimum=1))
        if self.t is not None:
            t = require_number(self.t, "the policy's t")
            if not 0 < t <= 1:
                raise ParameterError(f"the policy's t must be in (0, 1], got {self.t}")
            object.__setattr__(self, "t", t)
        risk = require_number(self.max_prosecutor_risk, "the policy's maximum prosecutor risk")
        if not 0 < risk <= 1:
            raise ParameterError(
                f"the policy's maximum prosecutor risk must be in (0, 1], got {risk}"
            )
        object.__setattr__(self, "max_prosecutor_risk", risk)
        if self.max_attack_excess is not None:
            excess = require_number(self.max_attack_excess, "the policy's maximum attack excess")
            if not 0 <= excess <= 1:
                raise ParameterError(
                    f"the policy's maximum attack excess must be in [0, 1], got {excess}"
                )
            object.__setattr__(self, "max_attack_excess", excess)
        if self.max_membership_auc is not None:
            auc = require_number(self.max_membership_auc, "the policy's maximum membership AUC")
            if not 0.5 <= auc <= 1:
                raise ParameterError(
                    f"the policy's maximum membership AUC must be in [0.5, 1] (0.5 is chance), "
                    f"got {auc}"
                )
            object.__setattr__(self, "max_membership_auc", auc)

    @property
    def prosecutor_k(self) -> int:
        """Smallest class size whose prosecutor risk (1 / size) is within the maximum."""
        return max(1, math.ceil(1.0 / self.max_prosecutor_risk - 1e-9))

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "l": self.l,
            "t": self.t,
            "max_prosecutor_risk": self.max_prosecutor_risk,
            "max_attack_excess": self.max_attack_excess,
            "max_membership_auc": self.max_membership_auc,
            "models": [dict(s) for s in self.models or ()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PolicyThresholds:
        data = dict(data or {})
        unknown = set(data) - {
            "k",
            "l",
            "t",
            "max_prosecutor_risk",
            "max_attack_excess",
            "max_membership_auc",
            "models",
        }
        if unknown:
            raise ParameterError(f"unknown policy threshold(s): {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass(frozen=True)
class PolicyResult:
    """The findings, and the risk after as the policy measured it (figures only)."""

    findings: tuple[Finding, ...]
    thresholds: PolicyThresholds
    risk: dict[str, Any] = field(default_factory=dict)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocks]

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "blocking": len(self.blocking),
            "thresholds": self.thresholds.to_dict(),
            "risk": dict(self.risk),
        }


def evaluate_release(
    source: pd.DataFrame,
    released: pd.DataFrame,
    *,
    plan: Plan | Mapping[str, Any],
    tags: Mapping[str, str | None],
    thresholds: PolicyThresholds | None = None,
    report: Mapping[str, Any] | None = None,
    conflicts: ConflictReport | Sequence[Finding] | None = None,
    statuses: Mapping[str, str] | None = None,
    internal_report: Mapping[str, Any] | None = None,
    attacks: Mapping[str, Any] | None = None,
) -> PolicyResult:
    """Evaluate a release of ``source`` (never modified) that publishes ``released``.

    ``attacks`` are the attack figures of the release (its internal report's ``attacks``),
    checked against the policy's caps on them.

    ``tags`` maps a source column to its role (missing or empty: never tagged); ``report`` is the
    report that would be published with the release; ``conflicts`` the conflict check of this
    release against the earlier approved or pending ones, ``statuses`` their review status by
    label. ``conflicts`` may also be gate findings already made from such a check.
    ``internal_report`` is the release's internal report (its synthetic steps' comparison with
    the source and the independent baseline)."""
    plan = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    thresholds = thresholds or PolicyThresholds()
    output = _output_kind(plan)
    findings: list[Finding] = []
    extra_qis: list[str] = []
    risk: dict[str, Any] = {"output": output}
    if output == "rows":
        shared = [c for c in released.columns if c in source.columns]
        masked, found = _identifier_findings(source, released, plan, tags, shared, thresholds)
        findings += found
        extra_qis += masked
        findings += _column_findings(source, released, tags, shared)
        found, risk = _risk_findings(
            list(released.columns),
            len(released),
            _frame_classes(released, blanks_match=blanks_cells(plan)),
            plan,
            tags,
            extra_qis,
            thresholds,
        )
        findings += found
    if isinstance(conflicts, ConflictReport) or conflicts is None:
        findings += conflict_findings(conflicts, statuses=statuses)
    else:
        findings += list(conflicts)
    findings += _report_findings(plan, output, thresholds, report, internal_report, attacks)
    return PolicyResult(tuple(findings), thresholds, risk)


def _report_findings(
    plan: Plan,
    output: str,
    thresholds: PolicyThresholds,
    report: Mapping[str, Any] | None,
    internal_report: Mapping[str, Any] | None,
    attacks: Mapping[str, Any] | None,
) -> list[Finding]:
    """What the reports say: exact figures beside DP output, synthetic quality, attacks."""
    findings = []
    if output != "rows" or _has_measurement(plan):
        findings += _dp_findings(report, plan)
    findings += _synthetic_findings(internal_report)
    findings += attack_findings(
        attacks,
        max_excess=thresholds.max_attack_excess,
        max_auc=thresholds.max_membership_auc,
    )
    return findings


def evaluate_engine_release(
    columns: Sequence[str],
    rows: int,
    classes_of: ClassesOf,
    *,
    plan: Plan,
    tags: Mapping[str, str | None],
    engine: str,
    thresholds: PolicyThresholds | None = None,
    report: Mapping[str, Any] | None = None,
    internal_report: Mapping[str, Any] | None = None,
    attacks: Mapping[str, Any] | None = None,
    conflicts: Sequence[Finding] = (),
) -> PolicyResult:
    """:func:`evaluate_release` of a release an engine wrote out of core (``columns``, ``rows``
    records), its risk after from ``classes_of`` (the classes of the released table as the
    engine counts them), checked by the same model checks, with the ``attacks``' figures and
    the ``conflicts`` findings as :func:`evaluate_release` has them.

    The value checks that read whole columns (identifiers left in, free text) are not made out
    of core, so they fail closed: a released column outside the quasi-identifiers and sensitive
    columns that is not tagged ``keep`` (reviewed and kept as is) blocks the release."""
    plan = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    thresholds = thresholds or PolicyThresholds()
    measured = set(quasi_identifiers_for(plan, tags, []))
    measured |= {c for c, r in tags.items() if r == SENSITIVE} | set(plan.sensitive)
    findings = [
        column_unchecked(col, rows=rows, engine=engine)
        for col in columns
        if col not in measured and tags.get(col) != KEEP
    ]
    found, risk = _risk_findings(columns, rows, classes_of, plan, tags, [], thresholds)
    findings += found
    findings += _report_findings(plan, "rows", thresholds, report, internal_report, attacks)
    findings += list(conflicts)
    return PolicyResult(tuple(findings), thresholds, risk)


def column_unchecked(col: str, *, rows: int, engine: str) -> Finding:
    return Finding(
        "column_unchecked",
        BLOCK,
        f"{col} goes out in {rows} records unread by the release policy: a release written by "
        f"the {engine} engine is checked on its quasi-identifiers and sensitive columns, not on "
        "the values of the others (identifiers, free text). Drop it, or tag it 'keep as is' "
        "once reviewed.",
        (col,),
        rows,
        {"engine": engine},
    )


def _synthetic_findings(report: Mapping[str, Any] | None) -> list[Finding]:
    """Warn when a synthetic step does not beat the independent baseline at its ε: the facts are
    its parameters, never the figures measured on the source."""
    out = []
    for i, step in enumerate((report or {}).get("steps") or [], 1):
        quality = step.get("quality_vs_source")
        if step.get("method") == "independent" or not isinstance(quality, Mapping):
            continue
        if quality.get("beats_baseline") is not False:
            continue
        eps = step.get("epsilon_spent")
        out.append(
            Finding(
                "synthetic_below_baseline",
                WARN,
                f"Step {step.get('step', i)}'s synthetic table ({step.get('method')}, ε = "
                f"{eps:.3g}) does not beat the independent baseline at the same ε: its two-way "
                "marginals are no closer to the source's. Raise ε, use fewer bins or columns, "
                "or release the baseline.",
                facts={"method": step.get("method"), "epsilon": eps},
            )
        )
    return out


def evaluate_plan(
    plan: Plan | Mapping[str, Any],
    *,
    tags: Mapping[str, str | None],
    columns: Sequence[str],
    rows: int,
    thresholds: PolicyThresholds | None = None,
) -> PolicyResult:
    """The findings of :func:`evaluate_release` that the plan and the tags decide before
    anything runs, for a source with ``columns`` and ``rows``: an identifier that no step
    changes or drops (``identifier_released``), a column never tagged that goes out
    (``column_untagged``) and a record-level release with no quasi-identifier
    (``no_quasi_identifiers``). Everything measured on the data (partly masked identifiers,
    free text, the risk after, conflicts) waits for the release; a plan that passes here can
    still be blocked then, never the other way round."""
    plan = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    thresholds = thresholds or PolicyThresholds()
    output = _output_kind(plan)
    if output != "rows":
        return PolicyResult((), thresholds, {"output": output})
    removed: set[str] = set()
    for step in plan.steps:
        spec = get_step(step.kind)
        if spec.removes is not None:
            removed.update(spec.removes(step.params))
    written = _written_by(plan)
    findings: list[Finding] = []
    for col in (c for c in columns if c not in removed):
        tag = tags.get(col) or None
        if tag == IDENTIFIER and not written.get(col):
            findings.append(identifier_released(col, rows=rows))
        elif tag is None:
            findings.append(column_untagged(col, rows))
    if not quasi_identifiers_for(plan, tags):
        findings.append(no_quasi_identifiers(rows))
    return PolicyResult(tuple(findings), thresholds, {"output": output})


def identifier_released(col: str, *, rows: int, unchanged: int | None = None) -> Finding:
    """``unchanged``: released records that show a source value (None: judged from the plan,
    which leaves the column as it is)."""
    if unchanged is None:
        why = "no step of the plan changes or drops it"
        facts: dict[str, Any] = {"rows": rows}
    else:
        why = f"{unchanged} of {rows} released records show the source's value"
        facts = {"unchanged": unchanged, "rows": rows}
    return Finding(
        "identifier_released",
        BLOCK,
        f"{col} is tagged identifier and goes out unchanged: {why}. Drop, tokenize or suppress it.",
        (col,),
        rows if unchanged is None else unchanged,
        facts,
    )


def column_untagged(col: str, records: int) -> Finding:
    return Finding(
        "column_untagged",
        BLOCK,
        f"{col} was never tagged and goes out in this release: tag it "
        "(identifier, quasi-identifier, sensitive, other or keep as is).",
        (col,),
        records,
    )


def no_quasi_identifiers(records: int) -> Finding:
    return Finding(
        "no_quasi_identifiers",
        BLOCK,
        "No column is tagged quasi-identifier and the plan lists none, so the risk of "
        "re-identifying a record in this release cannot be measured. Tag the columns an "
        "attacker could know (age, sex, postcode, dates, ...).",
        (),
        records,
    )


def _output_kind(plan: Plan) -> str:
    """What the release's rows are: "rows" (record-level), "aggregate" or "synthetic"."""
    kind = "rows"
    for step in plan.steps:
        spec = get_step(step.kind)
        if spec.measurement:
            kind = spec.output
    return kind


def _has_measurement(plan: Plan) -> bool:
    return any(get_step(s.kind).measurement for s in plan.steps)


def _written_by(plan: Plan) -> dict[str, set[str]]:
    """Column -> the step kinds that change its values."""
    out: dict[str, set[str]] = {}
    for step in plan.steps:
        for col in get_step(step.kind).columns_written(step.params, plan):
            out.setdefault(col, set()).add(step.kind)
    return out


def _in_source(source: pd.Series, released: pd.Series) -> NDArray[Any]:
    """For each non-missing released value, whether the source column holds it (as text, so a
    generalized or masked value never matches by accident of type)."""
    values = released.dropna()
    known = pd.Index(source.dropna().astype(str).unique())
    return np.asarray(known.get_indexer(values.astype(str)) >= 0)


def _identifier_findings(
    source: pd.DataFrame,
    released: pd.DataFrame,
    plan: Plan,
    tags: Mapping[str, str | None],
    shared: list[str],
    thresholds: PolicyThresholds,
) -> tuple[list[str], list[Finding]]:
    masked: list[str] = []
    findings: list[Finding] = []
    written = _written_by(plan)
    for col in shared:
        if tags.get(col) != IDENTIFIER:
            continue
        values = released[col].dropna()
        if values.empty or (values.astype(str) == SUPPRESSED).all():
            continue  # suppressed entirely
        found = _in_source(source[col], released[col])
        if found.mean() >= UNCHANGED_SHARE:
            findings.append(
                identifier_released(col, rows=len(released), unchanged=int(found.sum()))
            )
            continue
        if written.get(col, set()) & PSEUDONYMS:
            continue
        sizes = released.groupby(col, dropna=False, sort=False, observed=True)[col].transform(
            "size"
        )
        unique = int((released[col].notna() & (sizes == 1)).sum())
        below_k = int((released[col].notna() & (sizes < thresholds.k)).sum())
        share = unique / len(released) if len(released) else 0.0
        masked.append(col)
        findings.append(
            Finding(
                "identifier_partly_masked",
                BLOCK,
                f"{col} is tagged identifier but only partly masked: {unique} of "
                f"{len(released)} records ({share:.0%}) are unique on what is kept of it "
                f"alone, and {below_k} share it with fewer than {thresholds.k}. It is counted "
                "as a quasi-identifier in the risk after; drop or tokenize it instead.",
                (col,),
                below_k,
                {"unique": unique, "unique_share": round(share, 4), "rows": len(released)},
            )
        )
    return masked, findings


def free_text(series: pd.Series) -> dict[str, Any] | None:
    """Why ``series`` looks like free text (mostly distinct or long values), or None."""
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        return None
    values = series.dropna()
    if pd.api.types.is_datetime64_any_dtype(values):
        return None
    if values.empty:
        return None
    text = values.astype(str)
    distinct = int(text.nunique())
    mean_length = float(text.str.len().mean())
    if len(text) >= FREE_TEXT_MIN_ROWS and distinct / len(text) > FREE_TEXT_DISTINCT:
        return {"distinct": distinct, "values": len(text), "mean_length": round(mean_length, 1)}
    if mean_length >= FREE_TEXT_LENGTH:
        return {"distinct": distinct, "values": len(text), "mean_length": round(mean_length, 1)}
    return None


def _column_findings(
    source: pd.DataFrame,
    released: pd.DataFrame,
    tags: Mapping[str, str | None],
    shared: list[str],
) -> list[Finding]:
    findings: list[Finding] = []
    for col in shared:
        tag = tags.get(col) or None
        if tag == IDENTIFIER:
            continue
        if tag is None:
            findings.append(column_untagged(col, int(released[col].notna().sum())))
        if tag == QUASI_IDENTIFIER:
            continue  # measured in the risk after
        why = free_text(source[col])
        if why is None:
            continue
        found = _in_source(source[col], released[col])
        if tag == KEEP and found.size and found.mean() >= UNCHANGED_SHARE:
            findings.append(
                Finding(
                    "free_text_kept",
                    WARN,
                    f"{col} looks like free text ({why['distinct']} distinct values in "
                    f"{why['values']}) and goes out verbatim in {int(found.sum())} records: the "
                    "officer tagged it 'keep as is' after review.",
                    (col,),
                    int(found.sum()),
                    why,
                )
            )
        elif tag != KEEP and found.size and found.mean() >= UNCHANGED_SHARE:
            findings.append(
                Finding(
                    "free_text",
                    BLOCK,
                    f"{col} looks like free text ({why['distinct']} distinct values in "
                    f"{why['values']}, {why['mean_length']:g} characters on average) and goes "
                    f"out verbatim in {int(found.sum())} records. Tag it quasi-identifier, "
                    "transform or drop it, or tag it 'keep as is' once reviewed.",
                    (col,),
                    int(found.sum()),
                    why,
                )
            )
    return findings


def quasi_identifiers_for(
    plan: Plan, tags: Mapping[str, str | None], extra: Sequence[str] = ()
) -> list[str]:
    """The quasi-identifiers the risk after is measured on: the tagged ones, the plan's, and the
    partly masked identifiers."""
    tagged = [c for c, r in tags.items() if r == QUASI_IDENTIFIER]
    return list(dict.fromkeys([*tagged, *plan.quasi_identifiers, *extra]))


# The released classes over some quasi-identifiers with some sensitive columns' counts, records
# reading ``*`` in every one of the plan's quasi-identifiers (the third argument) left out: the
# classes and how many records were left out.
ClassesOf = Callable[[list[str], list[str], list[str]], tuple[Any, int]]


def _frame_classes(released: pd.DataFrame, *, blanks_match: bool = False) -> ClassesOf:
    """The classes of a released table in memory. ``blanks_match``: the plan blanked cells
    (local suppression), so a blank matches every value, as sdcMicro counts NA, and k is judged
    on the blank-aware counts; counting a blank as a value of its own would refuse releases that
    local suppression made k-anonymous."""

    def classes(qis: list[str], sensitive: list[str], star: list[str]) -> tuple[Any, int]:
        exclude = suppressed_records(released, star)
        matching = None
        if blanks_match:
            matching = np.zeros(len(released), dtype=np.int64)
            kept = ~np.asarray(exclude, dtype=bool)
            matching[kept] = na_matching_counts(released[kept], quasi_identifiers=qis)
        data = class_data(
            released,
            quasi_identifiers=qis,
            sensitive=sensitive,
            exclude=exclude,
            matching=matching,
        )
        return data, int(exclude.sum())

    return classes


def _risk_findings(
    columns: Sequence[str],
    rows: int,
    classes_of: ClassesOf,
    plan: Plan,
    tags: Mapping[str, str | None],
    extra_qis: list[str],
    thresholds: PolicyThresholds,
) -> tuple[list[Finding], dict[str, Any]]:
    qis_all = quasi_identifiers_for(plan, tags, extra_qis)
    qis = [q for q in qis_all if q in columns]
    sensitive = [
        s
        for s in dict.fromkeys([*(c for c, r in tags.items() if r == SENSITIVE), *plan.sensitive])
        if s in columns and s not in qis
    ]
    risk: dict[str, Any] = {"output": "rows", "quasi_identifiers": qis, "sensitive": sensitive}
    if not qis_all:
        return [no_quasi_identifiers(rows)], risk
    if not qis or rows == 0:
        risk["note"] = "no quasi-identifier is released"
        return [], risk
    data, suppressed = classes_of(qis, sensitive, [q for q in plan.quasi_identifiers if q in qis])
    if blanks_cells(plan):
        # after local suppression a blank cell matches every value (sdcMicro's NA rule): the
        # classes counted k on the blank-aware counts (see ``_frame_classes``)
        risk["k_blanks_matching"] = True
    findings = []
    specs = list(thresholds.models or ())
    k_check = KAnonymity(thresholds.k).check(data)
    risk.update(
        k=None if k_check.value is None else int(k_check.value),
        classes=len(data),
        records=int(data.sizes.sum()),
        suppressed=suppressed,
        max_prosecutor_risk=None if k_check.value is None else round(1.0 / k_check.value, 6),
    )
    size_specs = [s for s in specs if s.get("model") == "k_anonymity"]
    for spec in size_specs:
        findings += _model_findings(policy_models(spec, sensitive), data, qis, risk)
    p_check = KAnonymity(thresholds.prosecutor_k).check(data)
    if not p_check.satisfied:
        findings.append(
            Finding(
                "risk_prosecutor",
                BLOCK,
                f"After the plan, the highest prosecutor risk is {risk['max_prosecutor_risk']:.2g}"
                f" (1 / {risk['k']}); {p_check.failing_records} record(s) exceed the policy's "
                f"maximum of {thresholds.max_prosecutor_risk:g}.",
                tuple(qis),
                p_check.failing_records,
                {
                    "max_prosecutor_risk": risk["max_prosecutor_risk"],
                    "policy_max": thresholds.max_prosecutor_risk,
                },
            )
        )
    risk["l"], risk["t"] = {}, {}
    others = [s for s in specs if s.get("model") != "k_anonymity"]
    # column by column, each of the policy's models on it, then the table-wide models
    for column in sensitive:
        for spec in others:
            models = [m for m in policy_models(spec, sensitive) if m.sensitive == column]
            findings += _model_findings(models, data, qis, risk)
    for spec in others:
        table_wide = [m for m in policy_models(spec, sensitive) if m.sensitive is None]
        findings += _model_findings(table_wide, data, qis, risk)
    return findings, risk


def blanks_cells(plan: Plan) -> bool:
    """Whether the plan blanks cells of the quasi-identifiers (local suppression, as a step of
    its own or in place of the search's record suppression)."""
    return any(
        step.kind == "local_suppression"
        or (step.kind == "optimal_generalization" and bool(step.params.get("local_suppression")))
        for step in plan.steps
    )


def _risk_key(model: PrivacyModel) -> str:
    """Where the risk after keeps a model's figure: ``k``, ``l`` and ``t`` as before, the
    others under their kind."""
    code = model.policy_code
    return model.kind if code == "risk_model" else code.removeprefix("risk_")


def _model_findings(
    models: Sequence[PrivacyModel], data: Any, qis: Sequence[str], risk: dict[str, Any]
) -> list[Finding]:
    """Each model of the policy checked by its own check; a failure is a blocking finding."""
    out = []
    for model in models:
        try:
            check = model.check(data)
        except CoreError as exc:
            # a threshold the release cannot be judged by (its weight or household column is
            # not released, say) blocks it: the gate fails closed
            out.append(
                Finding(
                    model.policy_code,
                    BLOCK,
                    f"The policy asks for {model.describe()}, which this release cannot be "
                    f"judged by: {exc}",
                    tuple(qis),
                    0,
                    {"model": model.to_dict()},
                )
            )
            continue
        key = _risk_key(model)
        if model.sensitive is not None:
            value = check.value
            if key == "l" and value is not None:
                value = int(value)
            risk.setdefault(key, {})[model.sensitive] = value
        elif key != "k":  # k is in the risk after already, with the classes and records
            risk[key] = check.value
        if check.satisfied:
            continue
        columns = (model.sensitive,) if model.sensitive is not None else tuple(qis)
        out.append(
            Finding(
                model.policy_code,
                BLOCK,
                model.policy_message(check, quasi_identifiers=qis),
                columns,
                check.failing_records,
                model.policy_facts(check),
            )
        )
    return out


def _dp_findings(report: Mapping[str, Any] | None, plan: Plan) -> list[Finding]:
    if not report:
        return []
    exposed = [k for k in SOURCE_KEYS if report.get(k) not in (None, {}, [])]
    exposed += internal_step_keys(report, plan)
    if not exposed:
        return []
    return [
        Finding(
            "dp_exact_figures",
            BLOCK,
            "This differentially private release would also publish exact figures of the "
            f"source ({', '.join(exposed)}), which the noise does not protect.",
            (),
            0,
            {"exposed": exposed},
        )
    ]
