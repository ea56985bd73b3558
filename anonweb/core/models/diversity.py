"""Homogeneity of sensitive attributes within classes: l-diversity and δ-disclosure.

All measures start from the same sparse table of (class, sensitive value, count) triples built
with one ``bincount``/``unique`` over integer codes, so no Python loop runs over rows or classes.
A missing sensitive value is a value of its own (an attacker learns "not recorded" too).

* distinct l: fewest distinct values in a class (Machanavajjhala et al. 2007).
* entropy l: exp of the smallest class entropy (natural log), kept as a float. pycanon floors it
  to an integer, which reports e.g. 2 for a class whose entropy l is 2.9.
* recursive (c,l): a class satisfies it when r1 < c (r_l + ... + r_m), r_i its value counts in
  descending order. For a given c the largest l every class satisfies is reported.
* δ-disclosure (Brickell & Shmatikov 2008): |log(p(s|class) / p(s))| < δ for every class and
  every value s of the table; the reported figure is the bound (the infimum of such δ), infinite
  (``None`` in JSON) when some class lacks a value of the table. ``delta_disclosure_present``
  takes the maximum over the values each class contains only, as pycanon does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.classes import EquivalenceClasses, equivalence_classes, json_value

DEFAULT_C = 2.0


@dataclass(frozen=True)
class SensitiveCounts:
    """(class, value, count) triples sorted by class, then count descending.

    ``values`` holds the distinct sensitive values (index = value code), ``value_counts`` their
    counts in the whole table; ``starts[j]`` is the first triple of class ``j``.
    """

    attribute: str
    classes: EquivalenceClasses = field(repr=False)
    cls: np.ndarray = field(repr=False)
    val: np.ndarray = field(repr=False)
    cnt: np.ndarray = field(repr=False)
    values: pd.Index = field(repr=False)
    value_counts: np.ndarray = field(repr=False)

    @property
    def sizes(self) -> np.ndarray:
        return self.classes.sizes

    @property
    def distinct(self) -> np.ndarray:
        return np.bincount(self.cls, minlength=self.classes.count)

    @property
    def starts(self) -> np.ndarray:
        d = self.distinct
        return np.concatenate(([0], np.cumsum(d)[:-1]))

    @property
    def share(self) -> np.ndarray:
        """p(value | class) of each triple."""
        return self.cnt / self.sizes[self.cls]


def sensitive_counts(ec: EquivalenceClasses, series: pd.Series) -> SensitiveCounts:
    """Count each sensitive value in each class (sparse: only the pairs that occur)."""
    codes, values = pd.factorize(series, use_na_sentinel=False)
    vcodes, m = codes.astype(np.int64, copy=False), len(values)
    n_classes = ec.count
    key = ec.codes * m + vcodes
    if n_classes * m <= max(4 * ec.rows, 1 << 20):
        dense = np.bincount(key, minlength=n_classes * m)
        key = np.flatnonzero(dense)
        cnt = dense[key]
    else:
        key, cnt = np.unique(key, return_counts=True)
    cls, val = np.divmod(key, m)
    order = np.lexsort((-cnt, cls))
    return SensitiveCounts(
        attribute=str(series.name),
        classes=ec,
        cls=cls[order],
        val=val[order],
        cnt=cnt[order].astype(np.int64),
        values=values,
        value_counts=np.bincount(vcodes, minlength=m),
    )


def counts_for(
    df: pd.DataFrame, *, quasi_identifiers: Sequence[str], sensitive: str
) -> SensitiveCounts:
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    require_columns(df, [sensitive], role="sensitive attribute")
    if sensitive in ec.quasi_identifiers:
        raise ParameterError(f"{sensitive!r} cannot be both a quasi-identifier and sensitive")
    return sensitive_counts(ec, df[sensitive])


def recursive_l(sc: SensitiveCounts, c: float) -> np.ndarray:
    """Per class, the largest l with r1 < c (r_l + ... + r_m); 0 if not even l = 1."""
    if not c > 0:
        raise ParameterError(f"recursive diversity needs c > 0, got {c}")
    sizes = sc.sizes[sc.cls]
    cum = np.cumsum(sc.cnt)
    before = cum - sc.cnt  # counts of the triples before this one, over all classes
    starts = sc.starts
    within_before = before - before[starts][sc.cls]
    tail = sizes - within_before  # r_l + ... + r_m for l = rank of this triple + 1
    top = sc.cnt[starts][sc.cls]
    # tail shrinks as l grows, so the ranks that pass form a prefix: count them.
    ok = top < c * tail
    return np.bincount(sc.cls, weights=ok, minlength=sc.classes.count).astype(np.int64)


def entropy(sc: SensitiveCounts) -> np.ndarray:
    """Natural-log entropy of the sensitive attribute within each class."""
    p = sc.share
    return -np.bincount(sc.cls, weights=p * np.log(p), minlength=sc.classes.count)


def delta_per_class(sc: SensitiveCounts, *, present_only: bool = False) -> np.ndarray:
    """Smallest δ bound per class: max |log(p(s|class)/p(s))|, inf if a value is absent.

    ``present_only`` skips the values a class lacks (pycanon's reading): a weaker figure, since
    learning that a target does *not* have a value is a disclosure too.
    """
    p_table = sc.value_counts[sc.val] / sc.classes.rows
    ratio = np.abs(np.log(sc.share / p_table))
    out = np.zeros(sc.classes.count)
    np.maximum.at(out, sc.cls, ratio)
    if not present_only:
        out[sc.distinct < len(sc.values)] = np.inf
    return out


@dataclass(frozen=True)
class LDiversity:
    """l-diversity of one sensitive attribute (table figures; per-class data in ``per_class``)."""

    attribute: str
    l_distinct: int
    l_entropy: float
    recursive_c: float
    l_recursive: int
    delta_disclosure: float
    delta_disclosure_present: float
    homogeneous_classes: int
    homogeneous_records: int
    counts: SensitiveCounts = field(repr=False, compare=False)

    def satisfies_recursive(self, *, c: float, l: int) -> bool:  # noqa: E741 (the paper's name)
        """Whether every class satisfies recursive (c, l)-diversity."""
        if l < 1:
            raise ParameterError(f"recursive diversity needs l >= 1, got {l}")
        return bool((recursive_l(self.counts, c) >= l).all())

    def per_class(self) -> dict[str, list]:
        """Per-class lists (aligned with the class order), ready for charts."""
        sc = self.counts
        starts = sc.starts
        return {
            "size": sc.sizes.tolist(),
            "l_distinct": sc.distinct.tolist(),
            "l_entropy": np.exp(entropy(sc)).tolist(),
            "l_recursive": recursive_l(sc, self.recursive_c).tolist(),
            "delta": [None if np.isinf(d) else float(d) for d in delta_per_class(sc)],
            "top_value": [json_value(sc.values[v]) for v in sc.val[starts]],
            "top_share": (sc.cnt[starts] / sc.sizes).tolist(),
        }

    def homogeneous(self, df: pd.DataFrame, *, limit: int | None = None) -> list[dict]:
        """Classes whose members all share one sensitive value: QI values, size and the value."""
        sc = self.counts
        which = np.flatnonzero(sc.distinct == 1)
        which = which[np.argsort(-sc.sizes[which], kind="stable")][:limit]
        qis = sc.classes.describe(df, which)
        starts = sc.starts[which]
        return [
            {"quasi_identifiers": q, "size": int(sc.sizes[j]), "value": json_value(sc.values[v])}
            for q, j, v in zip(qis, which, sc.val[starts], strict=True)
        ]

    def to_dict(self) -> dict:
        return {
            "l_distinct": self.l_distinct,
            "l_entropy": self.l_entropy,
            "recursive_c": self.recursive_c,
            "l_recursive": self.l_recursive,
            "delta_disclosure": None if np.isinf(self.delta_disclosure) else self.delta_disclosure,
            "delta_disclosure_present": self.delta_disclosure_present,
            "homogeneous_classes": self.homogeneous_classes,
            "homogeneous_records": self.homogeneous_records,
            "distinct_values": len(self.counts.values),
        }


def l_diversity_of(sc: SensitiveCounts, *, recursive_c: float = DEFAULT_C) -> LDiversity:
    distinct = sc.distinct
    homogeneous = distinct == 1
    return LDiversity(
        attribute=sc.attribute,
        l_distinct=int(distinct.min()),
        l_entropy=float(np.exp(entropy(sc).min())),
        recursive_c=float(recursive_c),
        l_recursive=int(recursive_l(sc, recursive_c).min()),
        delta_disclosure=float(delta_per_class(sc).max()),
        delta_disclosure_present=float(delta_per_class(sc, present_only=True).max()),
        homogeneous_classes=int(homogeneous.sum()),
        homogeneous_records=int(sc.sizes[homogeneous].sum()),
        counts=sc,
    )


def l_diversity(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    recursive_c: float = DEFAULT_C,
) -> LDiversity:
    """Distinct, entropy and recursive (c,l)-diversity and δ-disclosure of ``sensitive``."""
    sc = counts_for(df, quasi_identifiers=quasi_identifiers, sensitive=sensitive)
    return l_diversity_of(sc, recursive_c=recursive_c)
