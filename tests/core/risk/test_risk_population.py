"""Population-uniqueness estimates (Pitman, Zayatz, SNB; Dankar et al.'s choice)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import ParameterError
from anonweb.core.risk.population import (
    dankar_uniques,
    individual_risk,
    pitman_fit,
    pitman_uniques,
    population_uniqueness,
    shlosser_classes,
    snb_moments,
    snb_uniques,
    zayatz_uniques,
)


def sample_sizes(population_classes: int, sample: int, seed: int) -> np.ndarray:
    """Class sizes of a random sample from a skewed population (Zipf-like class sizes)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, population_classes + 1) ** 1.1
    pop = rng.multinomial(population_classes * 20, weights / weights.sum())
    people = np.repeat(np.arange(population_classes), pop)
    drawn = rng.choice(people, size=sample, replace=False)
    return np.bincount(drawn)[np.bincount(drawn) > 0], len(people), int((pop == 1).sum())


def test_no_sample_uniques_means_no_population_uniques():
    est = population_uniqueness(np.array([2, 3, 5]), 1000)
    assert est.chosen_uniques == 0.0 and est.sample_uniques == 0


def test_census_is_its_own_population():
    est = population_uniqueness(np.array([1, 1, 2]), 4)
    assert est.chosen_uniques == 2.0 and est.chosen_model == "sample"


def test_small_sampling_fraction_uses_pitman():
    sizes, n_pop, _ = sample_sizes(20000, 8000, seed=1)
    est = population_uniqueness(sizes, n_pop)
    assert sizes.sum() / n_pop <= 0.1
    assert est.chosen_model == "pitman"
    d = est.to_dict()
    assert "Hoshino 2001" in d["estimates"]["pitman"]["reference"]
    # Never more population uniques than people, never fewer than zero.
    for v in d["estimates"].values():
        assert v["uniques"] is None or 0 <= v["uniques"] <= n_pop


def test_large_sampling_fraction_uses_the_smaller_of_zayatz_and_snb():
    sizes, n_pop, _ = sample_sizes(3000, 40000, seed=2)
    est = population_uniqueness(sizes, n_pop)
    values = dict(est.estimates)
    assert est.chosen_model in ("zayatz", "snb")
    candidates = [v for k, v in values.items() if k in ("zayatz", "snb") and v is not None]
    assert est.chosen_uniques == min(candidates)


@pytest.mark.parametrize(
    "classes, sample, seed",
    [(20000, 8000, 1), (3000, 40000, 2), (20000, 60000, 3), (500, 300, 4)],
)
def test_the_search_reads_the_model_dankars_rule_picks(classes, sample, seed):
    # below and above a 10% sampling fraction: the search computes only the models the rule
    # reads there, and gets the figure the report shows
    sizes, n_pop, _ = sample_sizes(classes, sample, seed)
    est = population_uniqueness(sizes, n_pop)
    assert est.chosen_model is not None
    assert dankar_uniques(sizes, n_pop) == est.chosen_uniques
    assert dankar_uniques(np.array([2, 3, 5]), 1000) == 0.0
    assert dankar_uniques(np.array([1, 1, 2]), 4) == 2.0
    with pytest.raises(ParameterError):
        dankar_uniques(sizes, int(sizes.sum()) - 1)


def test_models_are_in_a_plausible_range():
    # Sample uniques that are population uniques cannot exceed the population's uniques by much,
    # and the estimates should be within an order of magnitude of the truth.
    sizes, n_pop, true_uniques = sample_sizes(20000, 60000, seed=3)
    for fn in (pitman_uniques, zayatz_uniques, snb_uniques):
        value = fn(sizes, n_pop)
        if np.isnan(value):
            continue
        assert true_uniques / 10 <= value <= true_uniques * 10, fn.__name__


def test_shlosser_counts_at_least_the_observed_classes():
    sizes = np.array([1, 1, 1, 2, 3, 5, 8])
    assert shlosser_classes(sizes, 0.1) >= len(sizes)


def test_profile_reports_the_population_section():
    df = pd.DataFrame({"q": list(range(50)) + [1, 2, 3] * 10})
    d = assess_risk(df, quasi_identifiers=["q"], population_size=5000).to_dict()
    pop = d["population"]
    assert pop["sample_uniques"] == 47 and pop["population_size"] == 5000
    assert pop["model"] in ("pitman", "zayatz", "snb")
    assert 0 <= pop["population_uniqueness"] <= 1


def test_population_smaller_than_the_sample_is_refused():
    with pytest.raises(ValueError, match="smaller than the table"):
        population_uniqueness(np.array([1, 2]), 2)


def test_pitman_fit_solves_the_likelihood_equations_term_by_term():
    # ARX checks its closed-form solution against the plain sums; so do we.
    sizes, _, _ = sample_sizes(20000, 8000, seed=4)
    theta, alpha = pitman_fit(sizes)
    counts = np.bincount(sizes)
    n, u = sizes.sum(), len(sizes)
    i = np.arange(1, u)
    d_theta = (1 / (theta + i * alpha)).sum() - (1 / (theta + np.arange(1, n))).sum()
    tail = sum(counts[j] * (1 / (np.arange(1, j) - alpha)).sum() for j in range(2, counts.size))
    d_alpha = (i / (theta + i * alpha)).sum() - tail
    assert abs(d_theta) < 1e-6 and abs(d_alpha) < 1e-4


def test_snb_closed_forms_match_the_series():
    # E[c1], E[c2] as explicit sums over population class sizes F = 1, 2, ... (truncated).
    k, a, b, f = 1000.0, 0.7, 0.3, 0.2
    big_f = np.arange(1, 400)
    m = big_f - 1
    p_f = np.exp(
        special.gammaln(m + a)
        - special.gammaln(a)
        - special.gammaln(m + 1)
        + a * np.log(b)
        + m * np.log(1 - b)
    )
    e1 = k * (p_f * big_f * f * (1 - f) ** (big_f - 1)).sum()
    e2 = k * (p_f * big_f * (big_f - 1) / 2 * f * f * (1 - f) ** (big_f - 2)).sum()
    assert snb_moments(k, a, b, f) == pytest.approx((e1, e2), rel=1e-9)


@pytest.mark.parametrize("p", [0.001, 0.05, 0.5, 0.99])
def test_individual_risk_is_the_expected_inverse_population_class_size(p):
    f = np.array([1, 2, 3, 10, 400])
    ours = individual_risk(f, p)
    # E[1/F | f] with F - f negative binomial(f, p), summed term by term.
    h = np.arange(0, 200_000)[:, None]
    log_pmf = (
        special.gammaln(f + h)
        - special.gammaln(f)
        - special.gammaln(h + 1)
        + f * np.log(p)
        + h * np.log1p(-p)
    )
    series = (np.exp(log_pmf) / (f + h)).sum(axis=0)
    summable = f * (1 - p) / p < 20_000  # the negative binomial's mean is within the sum
    assert ours[summable] == pytest.approx(series[summable], rel=1e-6)
    # Beyond it, the known large-class approximation p / (f - (1 - p)).
    approx_large = p / (f - (1 - p))
    assert ours[~summable] == pytest.approx(approx_large[~summable], rel=1e-3)
    assert ours[0] == pytest.approx(p * np.log(1 / p) / (1 - p))  # the f = 1 closed form
    assert (np.diff(ours) < 0).all()


def test_individual_risk_of_a_census_is_one_over_the_class_size():
    assert individual_risk(np.array([1, 2, 4]), 1.0).tolist() == [1.0, 0.5, 0.25]


def test_journalist_risk_estimated_from_the_population_size():
    df = pd.DataFrame({"q": list(range(50)) + [1, 2, 3] * 10})
    d = assess_risk(df, quasi_identifiers=["q"], population_size=5000).to_dict()
    j = d["journalist_risk"]
    assert "estimate" in j["source"]
    assert j["max"] == pytest.approx(individual_risk(np.array([1]), 80 / 5000)[0])
    assert j["mean"] < d["prosecutor_risk"]["mean"]
