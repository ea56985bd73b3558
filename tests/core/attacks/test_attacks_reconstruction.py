"""Reconstruction from published figures: sums and means fix numbers (with their bounds and
integrality), tables of counts fix categories; noisy (DP) figures fix nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.attacks.reconstruction import (
    CountCell,
    reconstruct_categories,
    reconstruct_numeric,
)
from anonweb.core.conflicts.solver import equations_from_lists

BMI = [24, 35, 41, 43, 44, 48, 50]  # seed 000: Bob, Kate, Jane, Doug, Louis, John, Susane


def means_as_sums(groups: list[list[int]]) -> list[float]:
    return [float(np.mean([BMI[i] for i in g])) * len(g) for g in groups]


def test_two_bmi_microaggregations_give_away_doug_fultons_43():
    groups = [[0, 1, 2, 3], [4, 5, 6], [0, 1, 2], [3, 4, 5, 6]]
    eqs = equations_from_lists(7, groups, means_as_sums(groups))
    r = reconstruct_numeric(eqs, column="bmi", low=10, high=70, integer=True)
    assert r.values == {3: 43.0}
    assert r.consistent and r.checked == 7
    one = [[0, 1, 2, 3], [4, 5, 6]]
    alone = reconstruct_numeric(
        equations_from_lists(7, one, means_as_sums(one)), column="bmi", low=10, high=70
    )
    assert alone.values == {}


def test_bounds_and_whole_numbers_fix_what_linear_algebra_cannot():
    # a mean of 1.0 over two people: any split solves the equation, but not with whole
    # numbers of at least 1 each
    eqs = equations_from_lists(3, [[0, 1], [1, 2]], [2.0, 11.0])
    assert reconstruct_numeric(eqs, column="visits", low=0, high=100).values == {}
    r = reconstruct_numeric(eqs, column="visits", low=1, high=100, integer=True)
    assert r.values == {0: 1.0, 1: 1.0, 2: 10.0}


PEOPLE = pd.DataFrame(
    {
        "age": [30, 30, 40, 40, 50, 50],
        "sex": ["F", "M", "F", "M", "F", "M"],
        "disease": ["flu", "cancer", "flu", "flu", "flu", "cancer"],
    }
)
CATS = ["flu", "cancer"]


def count_table(by: str, *, noise: np.random.Generator | None = None, epsilon: float = 1.0):
    """The published table of counts of each disease by ``by``, as the attacker reads it: the
    people of each group (they know everyone's age and sex) and the count."""
    cells = []
    for _, group in PEOPLE.groupby(by):
        for value in CATS:
            count = float((group["disease"] == value).sum())
            if noise is not None:
                count += noise.laplace(0, 1 / epsilon)
            cells.append(CountCell(group.index.to_numpy(), value, count, dp=noise is not None))
    return cells


def test_two_tables_of_counts_reconstruct_everyone_neither_does_alone():
    by_age = reconstruct_categories(6, count_table("age"), column="disease", categories=CATS)
    assert by_age.values == {2: "flu", 3: "flu"}  # the 40-year-olds all have flu
    by_sex = reconstruct_categories(6, count_table("sex"), column="disease", categories=CATS)
    assert by_sex.values == {0: "flu", 2: "flu", 4: "flu"}  # every woman has flu
    both = reconstruct_categories(
        6, count_table("age") + count_table("sex"), column="disease", categories=CATS
    )
    assert both.values == dict(enumerate(PEOPLE["disease"]))


@pytest.mark.parametrize("seed", range(3))
def test_dp_counts_reconstruct_nobody_even_beside_exact_ones(seed):
    rng = np.random.default_rng(seed)
    cells = count_table("age", noise=rng) + count_table("sex", noise=rng)
    assert reconstruct_categories(6, cells, column="disease", categories=CATS).values == {}
    # the exact table by age alone fixes the 40-year-olds; DP counts by sex add nobody
    mixed = count_table("age") + count_table("sex", noise=rng)
    r = reconstruct_categories(6, mixed, column="disease", categories=CATS)
    assert r.values == {2: "flu", 3: "flu"}


def test_a_rounded_figure_constrains_within_its_slack():
    # counts rounded to an even number: the women's flu count of 3 is published as 2 (± 1)
    cells = [
        CountCell(np.array([0, 2, 4]), "flu", 2.0, slack=1.0),
        CountCell(np.array([0, 2, 4]), "cancer", 0.0, slack=1.0),
    ]
    r = reconstruct_categories(6, cells, column="disease", categories=CATS)
    assert r.values == {}  # 2 or 3 women with flu: nobody is certain
    exact = [CountCell(np.array([0, 2, 4]), "flu", 3.0)]
    assert reconstruct_categories(6, exact, column="disease", categories=CATS).values == {
        0: "flu",
        2: "flu",
        4: "flu",
    }


def test_noisy_figures_taken_as_exact_are_inconsistent_not_revealing():
    eqs = equations_from_lists(3, [[0, 1], [1, 2]], [2.4, 11.3])
    r = reconstruct_numeric(eqs, column="visits", low=1, high=100, integer=True)
    assert not r.consistent and r.values == {}


def bmi_aggregates(label: str, groups: list[list[int]], precision: float = 0.0):
    from anonweb.core.conflicts.inference import Aggregate

    labels = np.full(len(BMI), -1)
    for g, members in enumerate(groups):
        labels[members] = g
    means = [float(np.mean([BMI[i] for i in g])) for g in groups]
    if precision:
        means = [round(m, 1) for m in means]
    return Aggregate(label, "bmi", labels, np.asarray(means), precision=precision)


def test_the_aggregates_of_two_releases_together_fix_doug_fultons_bmi():
    from anonweb.core.attacks.reconstruction import reconstruct_aggregates

    first = bmi_aggregates("release 1", [[0, 1, 2, 3], [4, 5, 6]])
    second = bmi_aggregates("release 2", [[0, 1, 2], [3, 4, 5, 6]])
    r = reconstruct_aggregates([first, second], values=np.asarray(BMI), column="bmi")
    assert r.values == {3: 43.0}
    assert reconstruct_aggregates([first], values=np.asarray(BMI), column="bmi").values == {}
    # means printed to one decimal still fix a whole-number BMI
    rounded = [
        bmi_aggregates(a.release, g, precision=0.05)
        for a, g in (
            (first, [[0, 1, 2, 3], [4, 5, 6]]),
            (second, [[0, 1, 2], [3, 4, 5, 6]]),
        )
    ]
    assert reconstruct_aggregates(rounded, values=np.asarray(BMI), column="bmi").values == {3: 43.0}


def test_a_dp_release_beside_an_exact_one_determines_nothing():
    from anonweb.core.attacks.reconstruction import reconstruct_aggregates

    first = bmi_aggregates("release 1", [[0, 1, 2, 3], [4, 5, 6]])
    second = bmi_aggregates("release 2", [[0, 1, 2], [3, 4, 5, 6]])
    r = reconstruct_aggregates(
        [first, second], values=np.asarray(BMI), column="bmi", dp=[False, True]
    )
    assert r.values == {}
