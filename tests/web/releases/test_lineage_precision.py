"""A release's lineage keeps the precision its figures were published with, so a later check
solves them as the intervals they are."""

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.inference import Aggregate
from anonweb.releases.storage import load_lineage, write_release_files


@pytest.mark.parametrize("precision", [0.0, 0.005])
def test_the_precision_of_published_figures_survives_storage(precision):
    agg = Aggregate(
        "r", "bmi", np.array([0, 0, 1, 1]), np.array([35.75, 47.33]), precision=precision
    )
    write_release_files("k1", pd.DataFrame({"bmi": [35.75] * 2 + [47.33] * 2}), aggregates=[agg])
    (loaded,) = load_lineage("k1", label="earlier").aggregates
    assert loaded.precision == precision and loaded.release == "earlier"
    assert loaded.figures.tolist() == [35.75, 47.33]
