"""The search rejects nodes, and all their specializations, on the records the monotonic
conditions of δ-disclosure, enhanced β-likeness and t-closeness prove must be suppressed: the
optimum must stay the exhaustive one, on tables where those bounds do reject nodes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models.beta_likeness import BetaLikeness
from anonweb.core.models.criteria import DeltaDisclosure, TCloseness
from anonweb.core.search.flash import optimal_generalization
from tests.core import oracle

DISEASES = ["flu", "ulcer", "cancer", "gastritis", "asthma", "hiv"]
TREE = Hierarchy(
    rows=(
        ("flu", "respiratory", "*"),
        ("asthma", "respiratory", "*"),
        ("ulcer", "digestive", "*"),
        ("gastritis", "digestive", "*"),
        ("cancer", "other", "*"),
        ("hiv", "other", "*"),
    ),
    attribute="disease",
)


def _table(seed: int, n: int) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    rng = np.random.default_rng(seed)
    zips = ["47677", "47602", "47678", "47905", "47909", "47906", "47911", "47912"]
    # the disease depends on the zip code, so that some classes hold far more of a value than
    # the table does and the bounds have something to reject
    zip_of = rng.choice(zips, n)
    skew = rng.dirichlet(np.full(len(DISEASES), 0.6), len(zips))
    disease = [DISEASES[rng.choice(len(DISEASES), p=skew[zips.index(z)])] for z in zip_of]
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "zip": zip_of,
            "sex": rng.choice(["F", "M"], n),
            "disease": disease,
        }
    )
    hierarchies = {
        "age": interval_hierarchy(df["age"], width=5, fanout=2, attribute="age"),
        "zip": mask_hierarchy(df["zip"], attribute="zip"),
        "sex": Hierarchy(rows=(("F", "*"), ("M", "*")), attribute="sex"),
    }
    return df, hierarchies


MODELS = {
    "delta": lambda: DeltaDisclosure("disease", 1.2),
    "beta": lambda: BetaLikeness("disease", 0.8),
    "t_equal": lambda: TCloseness("disease", 0.2),
    "t_hier": lambda: TCloseness("disease", 0.15, "hierarchical", TREE),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(
    "seed,k,suppression", [(31, 2, 0.05), (32, 3, 0.1), (33, 4, 0.2), (34, 1, 0.08)]
)
def test_optimum_equals_brute_force(name, seed, k, suppression):
    df, hierarchies = _table(seed, 260)
    qis = ["age", "zip", "sex"]
    model = MODELS[name]()
    spec = model.to_dict()
    if getattr(model, "hierarchy", None) is not None:
        spec["hierarchy_rows"] = [list(r) for r in model.hierarchy.rows]
    rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
    expected = oracle.brute_force(
        df, rows, qis, [{"model": "k_anonymity", "k": k}, spec], suppression, "geometric"
    )
    try:
        result = optimal_generalization(
            df,
            quasi_identifiers=qis,
            hierarchies=hierarchies,
            k=k,
            suppression=suppression,
            models=[model],
        )
    except ValueError:
        assert expected is None
        return
    assert expected is not None
    score, node, _losses, suppressed = expected
    assert tuple(result.levels[q] for q in qis) == node
    assert result.suppressed == suppressed
    assert result.information_loss == pytest.approx(score[0], abs=1e-9)
