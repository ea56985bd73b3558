"""Conflicting releases: two releases of one source that are each safe but leak when combined.

Checks, for two record-level releases of the same source whose rows can be aligned to the
source's rows (the app keeps that alignment privately; published files are shuffled):

* **Composition (intersection) attack** on a sensitive attribute (Ganta, Kasiviswanathan and
  Smith, "Composition attacks and auxiliary information in data privacy", KDD 2008). An
  attacker who knows a person's quasi-identifiers finds the person's class in each release. The
  person's sensitive value must be one that occurs in *both* classes. When the intersection of
  the two classes' value sets holds a single value, the value is disclosed even if each class on
  its own held several (each release l-diverse, the pair not).
* **Row linkage**: if the two files list records in the same order, or share a column that is
  unique per record, rows can be joined and the joint partition (class in A, class in B)
  applies. Its smallest class is reported as ``k_if_linked``.

The distinct-value intersection is computed for every pair of classes that some record falls in,
with pandas merges over (class, value) tables: no loop over records or classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.classes import combine_codes, dense_codes, group_codes


@dataclass(frozen=True)
class SensitiveConflict:
    attribute: str
    l_a: int  # distinct l of release A alone (over records, smallest class value count)
    l_b: int
    l_combined: int  # smallest intersection of the two classes' value sets, over records
    disclosed_a: int  # records whose class in A alone holds one value
    disclosed_b: int
    disclosed_combined: int  # records whose two classes share exactly one value
    newly_disclosed: int  # disclosed only when both releases are combined

    def to_dict(self) -> dict[Any, Any]:
        return {
            "attribute": self.attribute,
            "l_a": self.l_a,
            "l_b": self.l_b,
            "l_combined": self.l_combined,
            "disclosed_a": self.disclosed_a,
            "disclosed_b": self.disclosed_b,
            "disclosed_combined": self.disclosed_combined,
            "newly_disclosed": self.newly_disclosed,
        }


@dataclass(frozen=True)
class ConflictReport:
    rows: int
    k_a: int
    k_b: int
    k_if_linked: int
    sensitive: tuple[SensitiveConflict, ...]

    @property
    def conflicting(self) -> bool:
        """True when combining the releases discloses a sensitive value neither disclosed alone."""
        return any(s.newly_disclosed > 0 for s in self.sensitive)

    def to_dict(self) -> dict[Any, Any]:
        return {
            "rows": self.rows,
            "k_a": self.k_a,
            "k_b": self.k_b,
            "k_if_linked": self.k_if_linked,
            "conflicting": self.conflicting,
            "sensitive": [s.to_dict() for s in self.sensitive],
        }


def _class_codes(df: pd.DataFrame, qis: Sequence[str], label: str) -> NDArray[Any]:
    missing = [q for q in qis if q not in df.columns]
    if missing:
        raise DataError(f"release {label} lacks quasi-identifier column(s): {', '.join(missing)}")
    return group_codes(df.reset_index(drop=True), list(qis))


def _value_sets(classes: NDArray[Any], values: NDArray[Any]) -> pd.DataFrame:
    """Distinct (class, value) pairs."""
    return pd.DataFrame({"c": classes, "v": values}).drop_duplicates(ignore_index=True)


def _distinct_per_class(pairs: pd.DataFrame, classes: NDArray[Any]) -> NDArray[Any]:
    counts = np.bincount(pairs["c"].to_numpy(), minlength=int(classes.max()) + 1)
    return np.asarray(counts[classes])


def _intersection_sizes(a: NDArray[Any], b: NDArray[Any], values: NDArray[Any]) -> NDArray[Any]:
    """Per record: how many distinct values its A-class and its B-class have in common."""
    return common_values(a, values, b, values, a, b)


def common_values(
    a_codes: NDArray[Any],
    a_values: NDArray[Any],
    b_codes: NDArray[Any],
    b_values: NDArray[Any],
    a_of: NDArray[Any],
    b_of: NDArray[Any],
) -> NDArray[Any]:
    """Distinct values shared by the A-class ``a_of[j]`` and the B-class ``b_of[j]``, for each
    record ``j`` an attacker places in both.

    Class value sets are taken over all rows of each release (``a_codes[i]``, ``a_values[i]``
    for A's rows; B likewise), so releases may cover different records.
    """
    pairs_a = _value_sets(a_codes, a_values)
    pairs_b = _value_sets(b_codes, b_values)
    joint = pd.DataFrame({"a": a_of, "b": b_of}).drop_duplicates(ignore_index=True)
    # (a, b) x values of a, kept where b has the same value: the common values of each pair.
    common = joint.merge(pairs_a.rename(columns={"c": "a"}), on="a").merge(
        pairs_b.rename(columns={"c": "b"}), on=["b", "v"]
    )
    sizes = common.groupby(["a", "b"], sort=False).size().rename("n").reset_index()
    per_record = pd.DataFrame({"a": a_of, "b": b_of}).merge(sizes, on=["a", "b"], how="left")
    return np.asarray(per_record["n"].fillna(0).to_numpy(dtype=np.int64))


def _sensitive_conflict(
    attribute: str, a: NDArray[Any], b: NDArray[Any], source: pd.Series
) -> SensitiveConflict:
    values, _ = dense_codes(source.reset_index(drop=True))
    per_a = _distinct_per_class(_value_sets(a, values), a)
    per_b = _distinct_per_class(_value_sets(b, values), b)
    both = _intersection_sizes(a, b, values)
    alone = (per_a == 1) | (per_b == 1)
    combined = both == 1
    return SensitiveConflict(
        attribute=attribute,
        l_a=int(per_a.min()),
        l_b=int(per_b.min()),
        l_combined=int(both.min()),
        disclosed_a=int((per_a == 1).sum()),
        disclosed_b=int((per_b == 1).sum()),
        disclosed_combined=int(combined.sum()),
        newly_disclosed=int((combined & ~alone).sum()),
    )


def release_conflicts(
    source: pd.DataFrame,
    release_a: pd.DataFrame,
    release_b: pd.DataFrame,
    *,
    quasi_identifiers_a: Sequence[str],
    quasi_identifiers_b: Sequence[str] | None = None,
    sensitive: Sequence[str] = (),
) -> ConflictReport:
    """Compare two releases whose row ``i`` both describe source row ``i``.

    Sensitive values are taken from ``source`` (the truth the attacker is after); the classes
    from each release's own (generalized) quasi-identifier columns.
    """
    qis_b = list(quasi_identifiers_b if quasi_identifiers_b is not None else quasi_identifiers_a)
    if not quasi_identifiers_a or not qis_b:
        raise ParameterError("name the quasi-identifiers of both releases")
    n = len(source)
    if len(release_a) != n or len(release_b) != n:
        raise DataError(
            f"releases must list one row per source row to be compared (source {n}, "
            f"A {len(release_a)}, B {len(release_b)})"
        )
    missing = [s for s in sensitive if s not in source.columns]
    if missing:
        raise DataError(f"unknown sensitive column(s): {', '.join(map(str, missing))}")
    a = _class_codes(release_a, quasi_identifiers_a, "A")
    b = _class_codes(release_b, qis_b, "B")
    size_a = np.bincount(a)
    size_b = np.bincount(b)
    linked = combine_codes([(a, int(a.max()) + 1), (b, int(b.max()) + 1)], n)
    return ConflictReport(
        rows=n,
        k_a=int(size_a.min()),
        k_b=int(size_b.min()),
        k_if_linked=int(np.bincount(linked).min()),
        sensitive=tuple(_sensitive_conflict(str(s), a, b, source[s]) for s in sensitive),
    )
