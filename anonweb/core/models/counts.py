"""What the privacy models read: class sizes and, per sensitive column, sparse value counts.

Every model (:mod:`anonweb.core.models`) checks classes through a :class:`ClassData`, however
the classes were formed: grouped from a table (the assessment, the release report), joined across
two releases (the conflict check) or rolled up over a lattice node (the search). So a model is
written once and every path gives the same answer.

A sensitive column is described by its :class:`SensitiveDomain` (its distinct values and their
counts in the whole table, the distribution t-closeness and δ-disclosure compare with) and, per
set of classes, by :class:`SensitiveCounts`: (class, value, count) triples, only for the pairs that
occur. A missing sensitive value is a value of its own (an attacker learns "not recorded" too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.classes import (
    EquivalenceClasses,
    check_columns,
    class_dtype,
    code_dtype,
    equivalence_classes,
    group_codes,
)

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)
class SensitiveDomain:
    """One sensitive column over the whole table: distinct values (code = position), counts.

    ``rows`` counts every record of the table, including records a check leaves out of its
    classes (suppressed ones): t-closeness and δ-disclosure compare a class with the table as
    it was, as ARX does.
    """

    attribute: str
    values: pd.Index
    counts: NDArray[Any]
    _cache: dict[object, object] = field(default_factory=dict, repr=False)

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    @cached_property
    def share(self) -> NDArray[Any]:
        """p(value) in the whole table, per value code."""
        return self.counts / max(self.rows, 1)

    @cached_property
    def ranks(self) -> NDArray[Any]:
        """Rank (0-based) of each value in ascending order; missing values last."""
        return value_ranks(self.values)

    def cached(self, key: object, build: Callable[[], _T]) -> _T:
        """A per-domain cache for what a model derives from the values alone (hierarchy paths),
        so that a search checking thousands of nodes derives it once."""
        if key not in self._cache:
            self._cache[key] = build()
        # each key is built by one caller's builder, so it holds what that builder returns
        return cast(_T, self._cache[key])


def sensitive_domain(series: pd.Series) -> tuple[SensitiveDomain, NDArray[Any]]:
    """The domain of a column and the value code of each row."""
    codes, values = pd.factorize(series, use_na_sentinel=False)
    codes = codes.astype(np.int64, copy=False)
    counts = np.bincount(codes, minlength=len(values)).astype(np.int64)
    return SensitiveDomain(str(series.name), pd.Index(values), counts), codes


def value_ranks(values: pd.Index) -> NDArray[Any]:
    """Rank (0-based) of each distinct value in ascending order; missing values last."""
    s = pd.Series(values, dtype=values.dtype if values.dtype != bool else object)
    try:
        ranks = s.rank(method="first", na_option="bottom")
    except TypeError:  # mixed types: order by text
        ranks = s.where(s.isna(), s.astype(str)).rank(method="first", na_option="bottom")
    return np.asarray(ranks.to_numpy(), dtype=np.int64) - 1


@dataclass(frozen=True, eq=False)
class SensitiveCounts:
    """(class, value, count) triples sorted by class, then count descending.

    ``sizes[j]`` is the number of records in class ``j``; ``starts[j]`` its first triple.
    ``classes`` is kept when the classes come from grouping a table, to describe them.
    """

    domain: SensitiveDomain
    sizes: NDArray[Any] = field(repr=False)
    cls: NDArray[Any] = field(repr=False)
    val: NDArray[Any] = field(repr=False)
    cnt: NDArray[Any] = field(repr=False)
    classes: EquivalenceClasses | None = field(default=None, repr=False)

    @classmethod
    def from_codes(
        cls,
        domain: SensitiveDomain,
        class_codes: NDArray[Any],
        value_codes: NDArray[Any],
        n_classes: int,
        *,
        classes: EquivalenceClasses | None = None,
        weights: NDArray[Any] | None = None,
        sizes: NDArray[Any] | None = None,
    ) -> SensitiveCounts:
        """Count each value in each class from per-row codes (sparse: only pairs that occur).

        ``weights`` counts each row that many times (distinct rows standing for records).
        ``sizes``, when the caller has them, are the records per class (the sums of the
        weights per class), kept instead of summed again."""
        m = len(domain.values)
        rows = len(class_codes)
        # arrays as long as the triples are made in place, and freed as soon as read: a
        # histogram of 10^8 records has tens of millions of them
        new = _pair_starts(class_codes, value_codes, m) if weights is not None else None
        if new is not None and weights is not None:
            # a histogram's cells come in class order (values ascending inside): each pair is
            # a run of cells, summed in the order hashing would (first appearance is
            # ascending here); one cell per pair, as with one sensitive column, is no sum
            starts = None if bool(new.all()) else np.flatnonzero(new)
            del new
            if starts is None:
                c = np.asarray(class_codes)
                v = np.asarray(value_codes)
                cnt = _whole(weights)
            else:
                c = class_codes[starts]
                v = value_codes[starts]
                cnt = np.add.reduceat(_summable(weights), starts)
            del starts
            triples = [c, v, cnt]
        else:
            key = class_codes.astype(np.int64)  # a copy: the caller's codes are not changed
            key *= m
            key += value_codes
            if n_classes * m <= max(4 * rows, 1 << 20):
                dense = np.bincount(key, weights=weights, minlength=n_classes * m)
                key = np.flatnonzero(dense)
                cnt = dense[key]
                del dense
            elif weights is None:
                key, cnt = np.unique(key, return_counts=True)
            else:  # hashing: the triples are sorted below anyway
                inv, key = pd.factorize(key)
                cnt = np.bincount(inv, weights=weights, minlength=len(key))
                del inv
            triples = list(np.divmod(key, m)) + [cnt]
            del key, cnt
        if sizes is not None:
            sizes = np.asarray(sizes, dtype=np.int64)
            if len(sizes) != n_classes:
                raise DataError(f"{len(sizes)} class sizes for {n_classes} classes")
        elif weights is not None and np.asarray(weights).dtype.kind in "iub":
            sizes = whole_sums(class_codes, np.asarray(weights), n_classes)
        else:
            sizes = np.bincount(class_codes, weights=weights, minlength=n_classes)
            sizes = np.rint(sizes).astype(np.int64)
        return cls._sorted(domain, sizes, triples, classes)

    @classmethod
    def from_histogram(cls, domain: SensitiveDomain, hist: NDArray[Any]) -> SensitiveCounts:
        """From a dense (classes x values) matrix of counts, as the search keeps them."""
        counts = np.rint(hist).astype(np.int64)
        # each row sorted by descending count (ties in value order): the nonzero entries are
        # then already in the (class, descending count) order, with no sort over all triples
        order = np.argsort(-counts, axis=1, kind="stable")
        ranked = np.take_along_axis(counts, order, axis=1)
        c, j = np.nonzero(ranked)
        return cls(
            domain,
            counts.sum(axis=1),
            c.astype(np.int64),
            order[c, j].astype(np.int64),
            ranked[c, j],
            None,
        )

    @classmethod
    def _sorted(
        cls,
        domain: SensitiveDomain,
        sizes: NDArray[Any],
        triples: list[NDArray[Any]],
        classes: EquivalenceClasses | None,
    ) -> SensitiveCounts:
        """The counts of the (class, value, count) ``triples``, which are consumed: each
        array is let go once sorted, so no more than about two of them exist twice.

        Stored compact: class numbers in ``int32`` and value codes in the smallest type of the
        column's values while they fit, counts in ``int32`` while the largest does (sums of
        them, the class sizes, stay ``int64``)."""
        c, v, cnt = triples
        triples.clear()
        if cnt.dtype.kind == "f":
            cnt = np.rint(cnt).astype(np.int64)
        vtype = code_dtype(len(domain.values))
        if _ascending(c):
            # by class first: a class column already in order stays as it is, and each slice
            # of whole classes is sorted on its own (no order as long as the triples), the
            # counts narrowed slice by slice
            c = c.astype(class_dtype(len(sizes)), copy=False)
            cnt_sorted = np.empty(len(cnt), dtype=_count_dtype(cnt))
            v_sorted = np.empty(len(v), dtype=vtype)
            for s, e in _class_cuts(c):
                order = _by_class_then_count(c[s:e], cnt[s:e])
                cnt_sorted[s:e] = cnt[s:e][order]
                v_sorted[s:e] = v[s:e][order]
            return cls(domain, sizes, c, v_sorted, cnt_sorted, classes)
        cnt = cnt.astype(_count_dtype(cnt), copy=False)
        order = _by_class_then_count(c, cnt)
        cnt = cnt[order]
        v = v[order].astype(vtype, copy=False)
        c = c[order].astype(class_dtype(len(sizes)), copy=False)
        del order
        return cls(domain, sizes, c, v, cnt, classes)

    @property
    def attribute(self) -> str:
        return self.domain.attribute

    @property
    def values(self) -> pd.Index:
        return self.domain.values

    @property
    def value_counts(self) -> NDArray[Any]:
        return self.domain.counts

    @property
    def n_classes(self) -> int:
        return len(self.sizes)

    @cached_property
    def distinct(self) -> NDArray[Any]:
        """Number of distinct values in each class."""
        counted = np.bincount(self.cls, minlength=self.n_classes)
        return counted.astype(class_dtype(len(self.cls)), copy=False)

    @cached_property
    def starts(self) -> NDArray[Any]:
        """Position of each class's first triple (of the next class's, for a class with none)."""
        out = np.zeros(self.n_classes, dtype=class_dtype(len(self.cls)))
        np.cumsum(self.distinct[:-1], out=out[1:])
        return out

    @cached_property
    def share(self) -> NDArray[Any]:
        """p(value | class) of each triple (kept once computed: see :meth:`let_go`)."""
        return np.asarray(self.cnt / self.sizes[self.cls])

    def slices(self) -> Iterator[tuple[int, int, int, int]]:
        """``(s, e, j0, j1)``: triples ``s:e`` are those of classes ``j0:j1``, whole classes
        of about a million triples each, covering all (a class with no triple is in none:
        start its figure from zero). A figure summed per class over a slice adds each
        class's terms in the same order as over all triples, so it is the same to the last
        bit, with temporaries a slice long instead of as long as the triples."""
        for s, e in _class_cuts(self.cls):
            yield s, e, int(self.cls[s]), int(self.cls[e - 1]) + 1

    def slice_share(self, s: int, e: int) -> NDArray[Any]:
        """:attr:`share` of triples ``s:e``, the same values."""
        return np.asarray(self.cnt[s:e] / self.sizes[self.cls[s:e]])

    def let_go(self) -> None:
        """Forget :attr:`share` (a float per triple, what most figures read): the profile
        calls this once a column's figures are measured, so that the counts it keeps (to
        describe the classes) cost their compact triples alone. Asked again, it is computed
        again, the same."""
        self.__dict__.pop("share", None)


class ClassData:
    """The classes a set of models is checked on: their sizes and sensitive value counts.

    ``counts`` maps a sensitive column to its :class:`SensitiveCounts` for these classes; it may
    build them on first use (the search skips the histograms of nodes k-anonymity rejects).
    """

    def __init__(
        self,
        sizes: NDArray[Any],
        counts: Mapping[str, SensitiveCounts] | Callable[[str], SensitiveCounts] | None = None,
        histograms: Callable[[str], tuple[SensitiveDomain, NDArray[Any]]] | None = None,
        population: Callable[[Any], NDArray[Any]] | None = None,
        records: tuple[NDArray[Any], Callable[[str], pd.Series]] | None = None,
    ) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self._counts = counts
        self._built: dict[str, SensitiveCounts] = {}
        self._histograms = histograms
        self._population = population
        self._population_built: dict[int, NDArray[Any]] = {}
        # per record kept: its class, and a column's values (see record_values); None when
        # the classes were formed without their records (the search's roll-ups)
        self.record_class: NDArray[Any] | None = None if records is None else records[0]
        self._records: Callable[[str], pd.Series] | None = None if records is None else records[1]
        # per class, the records a record of it cannot be told apart from when a blank cell
        # matches every value (sdcMicro's NA rule, after local suppression); None: its size
        self.matching: NDArray[Any] | None = None
        self._figures: dict[object, NDArray[Any]] = {}

    def figure(self, key: object, build: Callable[[], NDArray[Any]]) -> NDArray[Any]:
        """A per-class figure computed once for these classes, for a model and the monotonic
        condition it implies that both read it (t-closeness's distances)."""
        got = self._figures.get(key)
        if got is None:
            got = self._figures[key] = build()
        return got

    def keep_figures(self, source: ClassData, rows: NDArray[Any]) -> None:
        """Take the figures ``source`` computed, for its classes ``rows`` (these classes)."""
        self._figures.update({key: got[rows] for key, got in source._figures.items()})

    def record_values(self, name: str, what: str) -> pd.Series:
        """Column ``name`` of each record kept in the classes (aligned with
        :attr:`record_class`), for the models that read a further column per record (survey
        weights, household ids); ``what`` names the model that asks, for the refusal."""
        if self._records is None or self.record_class is None:
            raise ParameterError(
                f"{what} is judged on a table's records (the release gate, the assessment), "
                "not on classes rolled up by the search"
            )
        return self._records(name)

    def weight_sums(self, weights: str | None, what: str) -> NDArray[Any]:
        """The sum of the survey weights of each class's records (``F_k``); without a weight
        column, the class sizes (every record stands for itself)."""
        if weights is None:
            return self.sizes.astype(float)
        values = self.record_values(weights, what)
        w = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not np.isfinite(w).all() or (w < 1).any():
            raise DataError(
                f"{what}: the weight column {weights!r} needs a number of at least 1 per record"
            )
        assert self.record_class is not None
        return np.bincount(self.record_class, weights=w, minlength=len(self.sizes))

    @property
    def indistinguishable(self) -> NDArray[Any]:
        """Per class, how many records each of its records is indistinguishable from: the
        class's size, or with blanks (local suppression) the blank-aware count."""
        return self.sizes if self.matching is None else self.matching

    def population_sizes(self, population: Any) -> NDArray[Any]:
        """The size in ``population`` (a
        :class:`~anonweb.core.models.population_table.PopulationTable`) of each class, counted
        at the same generalization (what k-map and δ-presence read). Refused when these classes
        were formed without a way to find them in a population."""
        got = self._population_built.get(id(population))
        if got is None:
            if self._population is None:
                raise ParameterError(
                    f"these classes cannot be matched with the population {population.name!r} "
                    "(a population table is used by the search and the release's own checks)"
                )
            got = np.asarray(self._population(population), dtype=np.int64)
            self._population_built[id(population)] = got
        return got

    def histogram(self, name: str) -> tuple[SensitiveDomain, NDArray[Any]] | None:
        """The dense (classes x values) counts of ``name`` with its domain, when these classes
        come with them (the search keeps them): a model that needs no ranking of the values
        reads them directly. None otherwise."""
        if self._histograms is None:
            return None
        return self._histograms(name)

    def present(self, name: str) -> tuple[SensitiveDomain, NDArray[Any]]:
        """Which values of ``name`` each class contains (a classes x values boolean matrix),
        with the column's domain: what the coverage bounds of the models read."""
        dense = self.histogram(name)
        if dense is not None:
            domain, hist = dense
            return domain, np.asarray(hist > 0)
        sc = self.sensitive(name)
        present = np.zeros((sc.n_classes, len(sc.values)), dtype=bool)
        present[sc.cls, sc.val] = True
        return sc.domain, present

    def __len__(self) -> int:
        return len(self.sizes)

    def sensitive(self, name: str) -> SensitiveCounts:
        """The value counts of sensitive column ``name`` in these classes."""
        got = self._built.get(name)
        if got is None:
            source = self._counts
            if callable(source):
                got = source(name)
            elif source is not None and name in source:
                got = source[name]
            else:
                got = _no_counts(name)
            self._built[name] = got
        return got

    def select(self, mask: NDArray[Any]) -> ClassData:
        """The same data for the classes where ``mask`` is true (the others dropped)."""
        keep = np.flatnonzero(mask)
        remap = np.full(len(self.sizes), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))

        def counts(name: str) -> SensitiveCounts:
            sc = self.sensitive(name)
            rows = np.isin(sc.cls, keep)
            return SensitiveCounts(
                sc.domain, sc.sizes[keep], remap[sc.cls[rows]], sc.val[rows], sc.cnt[rows]
            )

        population = None
        if self._population is not None:

            def population(table: Any) -> NDArray[Any]:
                return self.population_sizes(table)[keep]

        return ClassData(self.sizes[keep], counts, population=population)


def _no_counts(name: str) -> SensitiveCounts:
    raise ParameterError(
        f"{name!r} is not among the sensitive columns these classes were built with"
    )


def sensitive_counts(
    ec: EquivalenceClasses, series: pd.Series, *, keep: NDArray[Any] | None = None
) -> SensitiveCounts:
    """Count each sensitive value in each class of ``ec`` (rows aligned by position).

    With ``keep``, ``series`` is the whole column and ``ec`` groups only the rows ``keep``
    marks (suppressed records left out): the domain and its overall distribution stay the
    whole column's, as :func:`class_data` keeps them."""
    domain, codes = sensitive_domain(series)
    if keep is not None:
        codes = codes[np.asarray(keep, dtype=bool)]
    return SensitiveCounts.from_codes(domain, ec.codes, codes, ec.count, classes=ec)


def counts_for(
    df: pd.DataFrame, *, quasi_identifiers: Sequence[str], sensitive: str
) -> SensitiveCounts:
    """Group ``df`` by its quasi-identifiers and count ``sensitive`` in each class."""
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    require_columns(df, [sensitive], role="sensitive attribute")
    if sensitive in ec.quasi_identifiers:
        raise ParameterError(f"{sensitive!r} cannot be both a quasi-identifier and sensitive")
    return sensitive_counts(ec, df[sensitive])


def class_data(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    exclude: NDArray[Any] | pd.Series | None = None,
    population: Callable[[Any], NDArray[Any]] | None = None,
    matching: NDArray[Any] | None = None,
) -> ClassData:
    """The classes of ``df`` over its quasi-identifiers, for checking models on a table.

    ``exclude`` marks rows that form no class (suppressed records); they still count in the
    table's distribution of each sensitive column. ``population(table)``, when given, is the
    size in a population table of each row's class (see :meth:`ClassData.population_sizes`).
    ``matching`` gives, per row, the records it is indistinguishable from when a blank matches
    every value (:attr:`ClassData.matching`; rows with the same cells, blanks included, form a
    class and share it).
    """
    qis = check_columns(df, quasi_identifiers)
    data = class_data_from_codes(
        group_codes(df, qis),
        df,
        sensitive=sensitive,
        exclude=exclude,
        quasi_identifiers=qis,
        population=population,
    )
    if matching is not None:
        codes = group_codes(df, qis)
        keep = np.ones(len(df), dtype=bool) if exclude is None else ~np.asarray(exclude, bool)
        kept_codes, n_classes = _compact(codes[keep])
        per_class = np.zeros(n_classes, dtype=np.int64)
        per_class[kept_codes] = np.asarray(matching, dtype=np.int64)[keep]
        data.matching = per_class
    return data


def class_data_from_codes(
    codes: NDArray[Any],
    df: pd.DataFrame,
    *,
    sensitive: Sequence[str] = (),
    exclude: NDArray[Any] | pd.Series | None = None,
    quasi_identifiers: Sequence[str] = (),
    population: Callable[[Any], NDArray[Any]] | None = None,
) -> ClassData:
    """Classes given as one code per row of ``df`` (e.g. classes joined across two releases);
    ``population`` as for :func:`class_data`, per row of ``df``."""
    codes = np.asarray(codes, dtype=np.int64)
    if len(codes) != len(df):
        raise DataError(f"{len(codes)} class codes for a table of {len(df)} rows")
    require_columns(df, list(sensitive), role="sensitive attribute")
    both = sorted(set(sensitive) & set(quasi_identifiers))
    if both:
        raise ParameterError(
            f"columns cannot be both quasi-identifier and sensitive: {', '.join(both)}"
        )
    keep = np.ones(len(df), dtype=bool) if exclude is None else ~np.asarray(exclude, dtype=bool)
    kept_codes, n_classes = _compact(codes[keep])
    sizes = np.bincount(kept_codes, minlength=n_classes)

    def counts(name: str) -> SensitiveCounts:
        if name not in sensitive:
            _no_counts(name)
        domain, values = sensitive_domain(df[name])
        return SensitiveCounts.from_codes(domain, kept_codes, values[keep], n_classes)

    per_class = None
    if population is not None:
        row_population = population
        first = np.empty(n_classes, dtype=np.int64)
        first[kept_codes[::-1]] = np.arange(len(kept_codes) - 1, -1, -1)

        def per_class(table: Any) -> NDArray[Any]:
            return np.asarray(np.asarray(row_population(table))[keep][first])

    def records(name: str) -> pd.Series:
        require_columns(df, [name], role="column")
        return df[name][keep].reset_index(drop=True)

    return ClassData(sizes, counts, population=per_class, records=(kept_codes, records))


def _compact(codes: NDArray[Any]) -> tuple[NDArray[Any], int]:
    uniq, inv = np.unique(codes, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), len(uniq)


# rows handled at a time where a sort key is built from several arrays: the temporaries of
# one slice instead of whole arrays beside the key
_SLICE = 1 << 20


def _pair_starts(c: NDArray[Any], v: NDArray[Any], m: int) -> NDArray[Any] | None:
    """Where codes sorted by class, then value, start a new (class, value) pair (a flag per
    row); None when they are not in that order. Read a slice at a time, so that no key as
    long as the codes is built."""
    n = len(c)
    if n == 0:
        return None
    new = np.empty(n, dtype=bool)
    last = -1
    for s in range(0, n, _SLICE):
        key = c[s : s + _SLICE].astype(np.int64)
        key *= m
        key += v[s : s + _SLICE]
        if int(key[0]) < last or not bool((key[1:] >= key[:-1]).all()):
            return None
        new[s] = int(key[0]) != last
        np.not_equal(key[1:], key[:-1], out=new[s + 1 : s + len(key)])
        last = int(key[-1])
    return new


def _class_cuts(c: NDArray[Any]) -> Iterator[tuple[int, int]]:
    """Ranges ``s:e`` of about :data:`_SLICE` rows covering ``c`` (class numbers in
    ascending order), each ending where a class does."""
    n = len(c)
    s = 0
    while s < n:
        e = min(s + _SLICE, n)
        if e < n:
            e = int(np.searchsorted(c, c[e - 1], side="right"))
        yield s, e
        s = e


def _ascending(c: NDArray[Any]) -> bool:
    """Whether ``c`` never decreases (read a slice at a time)."""
    for s in range(0, len(c), _SLICE):
        part = c[s : s + _SLICE + 1]
        if not bool((part[1:] >= part[:-1]).all()):
            return False
    return True


def _whole(weights: NDArray[Any]) -> NDArray[Any]:
    """Per-row weights that are counts of records, as integers."""
    w = np.asarray(weights)
    return w if w.dtype.kind in "iub" else np.rint(w).astype(np.int64)


def _summable(weights: NDArray[Any]) -> NDArray[Any]:
    """Weights to sum: counts in ``int64`` (exact), anything else as float."""
    w = np.asarray(weights)
    return w.astype(np.int64, copy=False) if w.dtype.kind in "iub" else w.astype(float, copy=False)


def whole_sums(c: NDArray[Any], w: NDArray[Any], n_classes: int) -> NDArray[Any]:
    """Sum of integer weights (counts of records) per code of ``c``, exact in ``int64``:
    what ``bincount`` with the weights gives, rounded, with no float copy of them."""
    out = np.zeros(n_classes, dtype=np.int64)
    for s in range(0, len(c), _SLICE):
        np.add.at(out, c[s : s + _SLICE], w[s : s + _SLICE].astype(np.int64, copy=False))
    return out


def _count_dtype(cnt: NDArray[Any]) -> np.dtype[Any]:
    """``int32`` for counts when the largest fits (a count of more than 2^31 - 1 records
    keeps ``int64``); sums over them (class sizes, cumulative counts) are taken in ``int64``."""
    if cnt.size == 0 or (int(cnt.max()) < 1 << 31 and int(cnt.min()) >= -(1 << 31)):
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def _by_class_then_count(c: NDArray[Any], cnt: NDArray[Any]) -> NDArray[Any]:
    """``np.lexsort((-cnt, c))``: by class, then descending count, ties in their given order.
    Where class, count and position fit in 63 bits together, one sort of the packed integers
    (NumPy's vectorised sort, several times faster than ``lexsort`` on millions of triples),
    packed a slice at a time."""
    n = len(c)
    if n == 0:
        return np.asarray(np.lexsort((-cnt, c)))
    top = int(cnt.max())
    low = int(cnt.min())
    cbits = max(int(c.max()).bit_length(), 1)
    nbits = max((top - min(low, 0)).bit_length(), 1)
    ibits = max(int(n - 1).bit_length(), 1)
    if int(c.min()) < 0 or cbits + nbits + ibits > 63:
        return np.asarray(np.lexsort((-cnt.astype(np.int64), c)))
    packed = np.empty(n, dtype=np.int64)
    for s in range(0, n, _SLICE):
        part = packed[s : s + _SLICE]
        part[:] = c[s : s + _SLICE]
        part <<= nbits + ibits
        rank = np.subtract(top, cnt[s : s + _SLICE], dtype=np.int64)
        rank <<= ibits
        part |= rank
        part |= np.arange(s, s + len(part), dtype=np.int64)
    packed.sort()
    packed &= (1 << ibits) - 1
    return packed
