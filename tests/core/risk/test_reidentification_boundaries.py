"""Re-identification risk (anonweb/core/risk/reidentification.py) at its boundaries, worked by hand:
the default thresholds and a risk exactly at one, the thresholds 0 and 1, the journalist figures
with a population table, with only a population size (weighted by records) and with neither,
and which population sizes count as larger than the sample."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.population import individual_risk
from anonweb.core.risk.reidentification import (
    DEFAULT_THRESHOLDS,
    check_thresholds,
    reidentification_risk,
)


def table_of_class_sizes(*sizes: int) -> pd.DataFrame:
    """One quasi-identifier ``Q``; class ``c{i}`` holds ``sizes[i]`` records."""
    return pd.DataFrame({"Q": [f"c{i}" for i, n in enumerate(sizes) for _ in range(n)]})


def test_an_empty_table_has_no_risk_to_measure():
    empty = pd.DataFrame({"Q": pd.Series([], dtype=str)})
    with pytest.raises(DataError, match="the table has no rows"):
        reidentification_risk(empty, quasi_identifiers=["Q"])


def test_default_thresholds_are_one_in_5_10_20_and_100():
    assert DEFAULT_THRESHOLDS == (0.2, 0.1, 0.05, 0.01)


def test_records_at_risk_under_the_default_thresholds_count_risks_strictly_above():
    # Classes of 1, 5, 10, 20 and 100 records: risks 1, 1/5, 1/10, 1/20, 1/100, each of the last
    # four exactly at one default threshold, which it does not exceed.
    df = table_of_class_sizes(1, 5, 10, 20, 100)
    r = reidentification_risk(df, quasi_identifiers=["Q"])
    assert r.records_at_risk == (
        (0.2, 1),  # only the unique record
        (0.1, 1 + 5),
        (0.05, 1 + 5 + 10),
        (0.01, 1 + 5 + 10 + 20),
    )
    shares = {k: v["share"] for k, v in r.to_dict()["records_at_risk"].items()}
    assert shares == {"0.2": 1 / 136, "0.1": 6 / 136, "0.05": 16 / 136, "0.01": 36 / 136}


def test_threshold_zero_counts_every_record_and_threshold_one_none():
    # Every record has a risk above 0 (its class is finite); none above 1 (a class has a record).
    df = table_of_class_sizes(1, 2, 7)
    r = reidentification_risk(df, quasi_identifiers=["Q"], thresholds=(0, 1))
    assert r.records_at_risk == ((0.0, 10), (1.0, 0))
    assert r.to_dict()["records_at_risk"] == {
        "0.0": {"count": 10, "share": 1.0},
        "1.0": {"count": 0, "share": 0.0},
    }


@pytest.mark.parametrize("threshold", [0, 0.0, 0.5, 1, 1.0])
def test_thresholds_from_0_to_1_inclusive_are_accepted(threshold):
    assert check_thresholds([threshold]) == (float(threshold),)


@pytest.mark.parametrize("threshold", [-0.01, 1.01, 2])
def test_a_threshold_outside_0_to_1_is_refused_with_its_value(threshold):
    with pytest.raises(ParameterError, match=f"risk threshold {float(threshold)} is outside 0..1"):
        reidentification_risk(
            table_of_class_sizes(2), quasi_identifiers=["Q"], thresholds=[threshold]
        )


def test_a_threshold_that_is_not_a_number_is_named():
    with pytest.raises(ParameterError, match="risk threshold 'high' is not a number"):
        check_thresholds(["high"])


def test_risk_distribution_lists_records_per_risk_highest_first():
    r = reidentification_risk(table_of_class_sizes(1, 1, 4, 4, 4), quasi_identifiers=["Q"])
    assert r.risk_distribution() == [{"risk": 1.0, "records": 2}, {"risk": 0.25, "records": 12}]


def test_journalist_risk_without_population_data_is_the_prosecutor_figure():
    # Classes of 2 and 3: prosecutor max 1/2; mean over records (2 * 1/2 + 3 * 1/3) / 5 = 2/5.
    r = reidentification_risk(table_of_class_sizes(2, 3), quasi_identifiers=["Q"])
    assert r.journalist_source == "sample (upper bound)"
    assert (r.prosecutor_max, r.journalist_max) == (0.5, 0.5)
    assert r.journalist_mean == pytest.approx(2 / 5)
    assert r.marketer == pytest.approx(2 / 5)


@pytest.mark.parametrize("population_size", [3, 5])
def test_a_population_no_larger_than_the_sample_gives_the_sample_figures(population_size):
    # The sample is part of the population: a population of 5 (the sample itself) or fewer
    # says nothing more, so the figures stay the sample's upper bound.
    r = reidentification_risk(
        table_of_class_sizes(2, 3), quasi_identifiers=["Q"], population_size=population_size
    )
    assert r.journalist_source == "sample (upper bound)"
    assert r.journalist_max == 0.5


def test_a_population_one_record_larger_than_the_sample_is_estimated():
    r = reidentification_risk(
        table_of_class_sizes(2, 3), quasi_identifiers=["Q"], population_size=6
    )
    assert r.journalist_source.startswith("population size (estimate")
    assert r.journalist_max == pytest.approx(individual_risk(np.array([2]), 5 / 6)[0])


def expected_inverse_population_size(f: int, p: float, terms: int = 400) -> float:
    """E[1/F | f] with F - f negative binomial(f, p): the series, term by term."""
    return sum(math.comb(f + h - 1, h) * p**f * (1 - p) ** h / (f + h) for h in range(terms))


def test_estimated_journalist_risk_by_hand_and_its_mean_weighted_by_records():
    # Sample of 4 records out of 8 people (fraction 1/2): a unique and a class of 3.
    # A unique's risk is p ln(1/p) / (1 - p) = ln 2 = 0.693; the class of 3's series sums to
    # ln 2 - 1/2 = 0.193. The mean is over records, (1 * ln 2 + 3 * (ln 2 - 1/2)) / 4 =
    # ln 2 - 3/8 = 0.318, not over classes (ln 2 - 1/4 = 0.443).
    r = reidentification_risk(
        table_of_class_sizes(1, 3), quasi_identifiers=["Q"], population_size=8
    )
    unique, triple = math.log(2), expected_inverse_population_size(3, 0.5)
    assert triple == pytest.approx(math.log(2) - 1 / 2)
    assert r.journalist_max == pytest.approx(unique)
    assert r.journalist_mean == pytest.approx((1 * unique + 3 * triple) / 4)
    assert r.journalist_mean == pytest.approx(math.log(2) - 3 / 8)
    assert r.marketer == r.journalist_mean
    assert r.prosecutor_max == 1.0  # the prosecutor figure ignores the population


def test_journalist_risk_with_a_population_table_by_hand():
    # Population: a 4 people, b 2, z 0 (absent: the table is incomplete, so z counts its own
    # sample size, 1). Journalist max 1 / min(4, 2, 1) = 1; marketer (2/4 + 1/2 + 1/1) / 4.
    sample = pd.DataFrame({"Q": ["a", "a", "b", "z"]})
    population = pd.DataFrame({"Q": ["a"] * 4 + ["b"] * 2})
    r = reidentification_risk(sample, quasi_identifiers=["Q"], population=population)
    assert r.journalist_source == "population table"
    assert r.journalist_max == 1.0
    assert r.marketer == pytest.approx((2 / 4 + 1 / 2 + 1 / 1) / 4)
    assert r.journalist_mean == r.marketer


def test_population_table_matches_numbers_written_as_text():
    # The sample's ages are numbers, the population's text: 39 and "39" are the same people.
    sample = pd.DataFrame({"age": [39, 39, 40]})
    population = pd.DataFrame({"age": ["39"] * 10 + ["40"] * 5})
    r = reidentification_risk(sample, quasi_identifiers=["age"], population=population)
    assert r.journalist_max == pytest.approx(1 / 5)
    assert r.marketer == pytest.approx((2 / 10 + 1 / 5) / 3)
