"""Independent reference implementations for the tests: plain pandas and Python, written from the
definitions (papers, ARX's documentation), importing nothing from ``anonweb``.

They are slow and simple on purpose: a bug in the core cannot be copied into them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd

# --- privacy models, per class --------------------------------------------------------------


def class_ok(model: dict, values: list, table: Counter, hierarchy_rows=None) -> bool:
    """Whether one class (its sensitive ``values``, one per record) satisfies ``model``, a dict
    in the plan's JSON form; ``table`` counts the sensitive values of the whole table."""
    kind = model["model"]
    counts = Counter(values)
    n = len(values)
    if kind == "k_anonymity":
        return n >= model["k"]
    if kind == "distinct_l":
        return len(counts) >= model["l"]
    if kind == "entropy_l":
        h = -sum(c / n * math.log(c / n) for c in counts.values())
        return h >= math.log(model["l"]) - 1e-9
    if kind == "recursive_cl":
        r = sorted(counts.values(), reverse=True)
        l_, c = model["l"], model["c"]
        return len(r) >= l_ and r[0] < c * sum(r[l_ - 1 :])
    if kind == "delta_disclosure":
        total = sum(table.values())
        worst = max(abs(math.log2((c / n) / (table[v] / total))) for v, c in counts.items())
        return worst < model["delta"]
    if kind == "beta_likeness":
        # enhanced β-likeness (Cao & Karras 2012; ARX's EnhancedBLikeness): each value's
        # relative gain in the class is at most min(β, -ln p) for its share p in the table
        total = sum(table.values())
        for v, c in counts.items():
            p = table[v] / total
            if (c / n - p) / p > min(model["beta"], -math.log(p)) + 1e-9:
                return False
        return True
    if kind == "t_closeness":
        dist = emd(counts, table, model.get("distance", "equal"), hierarchy_rows)
        return dist <= model["t"] + 1e-9
    raise ValueError(kind)


MISSING = "\x00missing"  # a missing sensitive value, as a value of its own


def _key(v):
    return MISSING if _missing(v) else v


def _missing(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def emd(counts: Counter, table: Counter, distance: str, hierarchy_rows=None) -> float:
    """Earth mover's distance between a class's distribution and the table's (Li et al. 2007)."""
    n, total = sum(counts.values()), sum(table.values())
    keys = list(table)
    p = {k: counts.get(k, 0) / n for k in keys}
    q = {k: table[k] / total for k in keys}
    if distance == "equal":
        return 0.5 * sum(abs(p[k] - q[k]) for k in keys)
    if distance == "ordered":
        present = [k for k in keys if k != MISSING]
        order = sorted(present) + [k for k in keys if k == MISSING]
        m = len(order)
        if m < 2:
            return 0.0
        acc, cost = 0.0, 0.0
        for k in order:
            acc += p[k] - q[k]
            cost += abs(acc)
        return cost / (m - 1)
    # hierarchical: each inner node at height h moves min(positive, negative) extra of its
    # children at cost h / H; a missing value is a leaf directly under the root
    rows = {r[0]: r for r in hierarchy_rows}
    height = len(hierarchy_rows[0]) - 1

    def path(k):
        if k == MISSING:
            return [MISSING] * height + [hierarchy_rows[0][-1]]
        r = rows.get(str(k))
        if r is None and isinstance(k, float) and k.is_integer():
            r = rows[str(int(k))]
        return list(r)

    extra = {("leaf", k): p[k] - q[k] for k in keys}
    parent = {("leaf", k): (1, path(k)[1]) for k in keys}
    cost = 0.0
    for level in range(1, height + 1):
        nodes: dict = {}
        for child, node in parent.items():
            nodes.setdefault(node, []).append(child)
        new_extra, new_parent = {}, {}
        for node, children in nodes.items():
            pos = sum(extra[c] for c in children if extra[c] > 0)
            neg = -sum(extra[c] for c in children if extra[c] < 0)
            cost += level / height * min(pos, neg)
            new_extra[node] = pos - neg
            if level < height:
                some_leaf = next(k for k in keys if (level, path(k)[level]) == node)
                new_parent[node] = (level + 1, path(some_leaf)[level + 1])
        extra, parent = new_extra, new_parent
    return cost


def per_class_ok(
    df: pd.DataFrame, qis: list[str], model: dict, hierarchy_rows=None
) -> dict[tuple, bool]:
    """For each class (QI values, missing as None), whether it satisfies ``model``."""
    sens = model.get("sensitive")
    table = Counter(_key(v) for v in df[sens]) if sens else Counter()
    out = {}
    keys = [tuple(None if _missing(v) else v for v in row) for row in df[qis].itertuples(False)]
    groups: dict[tuple, list] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    for key, rows in groups.items():
        values = [_key(v) for v in df[sens].iloc[rows]] if sens else [None] * len(rows)
        out[key] = class_ok(model, values, table, hierarchy_rows)
    return out


# --- ARX's Loss, from the definition ---------------------------------------------------------


def arx_floor(x: Fraction) -> float:
    """ARX keeps 10 decimals of each per-attribute loss, cutting the rest off (computed here on
    exact fractions, so float noise cannot move a value across a cut)."""
    return math.floor(x * 10**10) / 1e10


def loss_per_qi(
    hierarchy_rows: list[list[str]], level: int, generalized: list, suppressed: list[bool]
) -> float:
    """ARX's Loss for one attribute: each kept record costs the share of the hierarchy's values
    its generalized value covers, a suppressed one costs 1; normalised between no
    generalization (1 / domain size each) and everything suppressed (1 each)."""
    size = len(hierarchy_rows)
    under = Counter(row[level] for row in hierarchy_rows)
    n = len(generalized)
    total = sum(
        Fraction(1) if s else Fraction(1 if _missing(g) else under[str(g)], size)
        for g, s in zip(generalized, suppressed)
    )
    lo = Fraction(n, size)
    return arx_floor(max((total - lo) / (n - lo), Fraction(0))) if n > lo else 0.0


def aggregate(values: list[float], how: str) -> float:
    if how == "geometric":
        return math.prod(1 + v for v in values) ** (1 / len(values)) - 1
    if how == "arithmetic":
        return sum(values) / len(values)
    if how == "sum":
        return sum(values)
    if how == "max":
        return max(values)
    raise ValueError(how)


# --- a full-domain generalization and a brute-force search ----------------------------------


def generalize(df: pd.DataFrame, hierarchies: dict[str, list[list[str]]], node: dict[str, int]):
    """Each QI to its level by looking its text up in the hierarchy rows (missing stays)."""
    out = df.copy()
    for q, lv in node.items():
        rows = hierarchies[q]
        table = {r[0]: r[lv] for r in rows}
        # at the root a missing value is generalized like any other
        absent = rows[0][-1] if lv == len(rows[0]) - 1 else None
        out[q] = [absent if _missing(v) else table[_text(v)] for v in df[q]]
    return out


def _text(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def zayatz_share(sizes: list[int], population: int) -> float:
    """Zayatz's (1991) estimate of the population's share of uniques from the sample's class
    sizes, written from the paper's formula: a sample unique is a population unique with
    probability P(unique | sampled once) from the hypergeometric law of drawing ``n`` of
    ``population`` records."""
    n = sum(sizes)
    freq = Counter(sizes)
    classes = sum(freq.values())

    def one(j: int) -> float:  # P(exactly 1 of a population class of size j is sampled)
        if population - j - n + 1 < 0:
            return 0.0
        log = (
            math.log(j)
            + math.lgamma(population - j + 1)
            - math.lgamma(n)
            - math.lgamma(population - j - n + 2)
            - (math.lgamma(population + 1) - math.lgamma(n + 1) - math.lgamma(population - n + 1))
        )
        return math.exp(log) if population - j - n + 1 >= 0 else 0.0

    denom = sum(f / classes * one(j) for j, f in freq.items())
    share_unique = (freq[1] / classes) * one(1) / denom
    return freq[1] * share_unique / (n / population) / population


def population_uniqueness_ok(sizes: list[int], model: dict) -> bool:
    """ARX's PopulationUniqueness on the kept classes: nothing kept or no sample uniques
    passes; otherwise the estimate must be at most the ceiling (Zayatz's model, or the sample's
    own uniques when the sample is the population)."""
    if not sizes or 1 not in sizes:
        return True
    population = model["population_size"]
    if population == sum(sizes):
        share = sizes.count(1) / population
    elif model.get("estimator") == "zayatz":
        share = zayatz_share(sizes, population)
    else:
        raise ValueError(model)
    return share <= model["max"] + 1e-12


def population_class_ok(
    sample: pd.DataFrame, population: pd.DataFrame, qis: list[str], model: dict
) -> dict[tuple, bool]:
    """For each class of the (generalized) sample, whether it satisfies a population-based
    model, the population generalized the same way: k-map (at least k people of the
    population share the class's values) or δ-presence (δmin <= sample / population <= δmax,
    as ARX's DPresence)."""

    def keys(df):
        return [tuple(None if _missing(v) else v for v in r) for r in df[qis].itertuples(False)]

    in_sample, in_population = Counter(keys(sample)), Counter(keys(population))
    out = {}
    for key, count in in_sample.items():
        people = in_population[key]
        if model["model"] == "k_map":
            out[key] = people >= model["k"]
        else:
            out[key] = people > 0 and model["min"] <= count / people <= model["max"]
    return out


TABLE_WIDE = ("average_risk", "population_uniqueness")


def table_wide_ok(sizes: list[int], models: list[dict]) -> bool:
    """Average risk (classes / records kept) and population uniqueness on the kept classes."""
    for m in models:
        if m["model"] == "average_risk":
            if sizes and len(sizes) / sum(sizes) > m["threshold"] + 1e-12:
                return False
        elif not population_uniqueness_ok(sizes, m):
            return False
    return True


def class_tie_loss(members, node, hierarchies, gen, how):
    """ARX's information loss of one class under Loss (records x the share of the domain its
    value covers, per QI, aggregated): how ARX orders classes of one size."""
    values = []
    for q, level in node.items():
        rows = hierarchies[q]
        under = Counter(r[level] for r in rows)
        g = gen[q].iloc[members[0]]
        share = Fraction(1 if _missing(g) else under[str(g)], len(rows))
        values.append(float(len(members) * share))
    if how == "rank":
        return tuple(sorted(values, reverse=True))
    return (round(aggregate(values, how), 12),)


def hierarchy_order(key: tuple, node: dict[str, int], hierarchies) -> tuple[int, ...]:
    """A class's generalized values as their places among their level's labels, in the order
    the hierarchy first names them (a missing value after them all)."""
    places = []
    for value, (q, level) in zip(key, node.items()):
        labels = list(dict.fromkeys(r[level] for r in hierarchies[q]))
        places.append(len(labels) if value is None else labels.index(str(value)))
    return tuple(places)


def smallest_to_suppress(keys, bad, models, budget, node, top, hierarchies, gen, how):
    """ARX's enforcement of table-wide models, written plainly: the kept classes (none at the
    top node) sorted by size, then loss, then their values in hierarchy order; the fewest of the first that make
    the models hold, found by trying every number in turn. Returns the keys of the classes
    suppressed, or None when the budget does not reach that number."""
    members: dict[tuple, list[int]] = {}
    for i, (k, b) in enumerate(zip(keys, bad)):
        if not b:
            members.setdefault(k, []).append(i)
    candidates = [] if top else list(members)
    candidates.sort(
        key=lambda k: (
            len(members[k]),
            class_tie_loss(members[k], node, hierarchies, gen, how),
            hierarchy_order(k, node, hierarchies),
        )
    )
    spent = 0
    for j in range(len(candidates) + 1):
        if j:
            spent += len(members[candidates[j - 1]])
        if spent > budget:
            return None
        gone = set(candidates[:j])
        if table_wide_ok([len(v) for k, v in members.items() if k not in gone], models):
            return gone
    return None


def brute_force(
    df: pd.DataFrame,
    hierarchies: dict[str, list[list[str]]],
    qis: list[str],
    models: list[dict],
    suppression: float,
    how: str = "geometric",
    population: pd.DataFrame | None = None,
):
    """Every node of the lattice: classes failing any model are suppressed if they fit within
    the limit, then the smallest classes while table-wide models (average risk, population
    uniqueness) need it and the limit allows (:func:`smallest_to_suppress`); the node of least
    aggregated Loss wins (ties: the lowest sum of levels, then the lexicographically first node).
    ``population`` is the population table k-map and δ-presence read.
    Returns (score, node, per-QI losses, suppressed rows) or None."""
    limit = math.floor(suppression * len(df) + 1e-9)
    heights = [len(hierarchies[q][0]) for q in qis]
    best = None
    t_hier = {m["sensitive"]: m.get("hierarchy_rows") for m in models if "sensitive" in m}
    for levels in itertools.product(*[range(h) for h in heights]):
        node = dict(zip(qis, levels))
        gen = generalize(df, hierarchies, node)
        bad = np.zeros(len(df), dtype=bool)
        keys = [tuple(None if _missing(v) else v for v in r) for r in gen[qis].itertuples(False)]
        for m in models:
            if m["model"] in ("average_risk", "population_uniqueness"):
                continue
            spec = {k: v for k, v in m.items() if k != "hierarchy_rows"}
            if m["model"] in ("k_map", "delta_presence"):
                assert population is not None, "a population-based model needs the population"
                ok = population_class_ok(gen, generalize(population, hierarchies, node), qis, spec)
            else:
                ok = per_class_ok(gen, qis, spec, t_hier.get(m.get("sensitive")))
            bad |= np.array([not ok[k] for k in keys])
        if bad.sum() > limit:
            continue
        table_wide = [m for m in models if m["model"] in TABLE_WIDE]
        if table_wide:
            top = all(lv == h - 1 for lv, h in zip(levels, heights))
            more = smallest_to_suppress(
                keys, bad, table_wide, limit - int(bad.sum()), node, top, hierarchies, gen, how
            )
            if more is None:
                continue
            bad |= np.array([k in more for k in keys])
        losses = [
            loss_per_qi(hierarchies[q], lv, list(gen[q]), list(bad)) for q, lv in zip(qis, levels)
        ]
        if how == "rank":
            score = tuple(sorted(losses, reverse=True))
        else:
            score = (round(aggregate(losses, how), 12),)
        if best is None or (score, sum(levels), levels) < (best[0], sum(best[1]), best[1]):
            best = (score, levels, losses, int(bad.sum()))
    return best
