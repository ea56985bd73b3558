"""The attacks on a release an engine wrote read its lineage: each sampled person's own
released row (found by DuckDB through the lineage file, however the rows were shuffled) is a
link, as in memory, where a noisy row of their own used to count only when it agreed with them
on every attacked column. The figures equal the in-memory attacks on the same people."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.attacks.run import run_attacks
from anonweb.core.engine.base import sample_positions
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.core.errors import ParameterError
from anonweb.core.release.engine_evidence import (
    NO_LINEAGE,
    WITH_LINEAGE,
    engine_attacks,
    own_combinations,
)

KNOWN = ["age", "sex", "height", "weight"]
SENSITIVE = ["disease"]


def source_and_release(n: int, seed: int):
    """A source, and a release of it with noisy ages, rows shuffled, some rows blanked, with
    its lineage (the source row of each released row)."""
    rng = np.random.default_rng(seed)
    source = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "height": rng.normal(170, 10, n).round(1),
            "weight": rng.normal(70, 12, n).round(1),
            "disease": rng.choice(["flu", "asthma", "ulcer"], n),
        }
    )
    order = rng.permutation(n)
    release = source.iloc[order].reset_index(drop=True)
    release["age"] = release["age"] + rng.integers(-3, 4, n)
    for col in ("height", "weight"):  # noise past the attacks' tolerance (5 % of the range)
        release[col] = (release[col] + rng.normal(0, 3, n)).round(1)
    release.loc[rng.random(n) < 0.05, "sex"] = None  # missing values match missing values
    return source, release, order.astype(np.int64)


@pytest.fixture
def files(tmp_path):
    source, release, lineage = source_and_release(3000, 2)
    source.to_parquet(tmp_path / "source.parquet", index=False)
    release.to_parquet(tmp_path / "release.parquet", index=False)
    pd.DataFrame({LINEAGE_COLUMN: lineage}).to_parquet(tmp_path / "lineage.parquet", index=False)
    return tmp_path, source, release, lineage


def on_duckdb(folder, *, lineage: bool, targets: int = 600) -> dict:
    duck = DuckDBEngine()
    try:
        from anonweb.core.attacks.options import AttackOptions

        return engine_attacks(
            duck,
            str(folder / "source.parquet"),
            str(folder / "release.parquet"),
            known=KNOWN,
            sensitive=SENSITIVE,
            kept=[*KNOWN, *SENSITIVE],
            options=AttackOptions(targets=targets),
            rng=np.random.default_rng(5),
            lineage=str(folder / "lineage.parquet") if lineage else None,
            duckdb=lambda: duck,
        )
    finally:
        duck.close()


def in_memory(source, release, lineage, *, targets: int = 600) -> dict:
    """The same people (the engine's sample positions, from the same rng) attacked in memory
    with the release's lineage, over the release's rows."""
    rng = np.random.default_rng(5)
    positions = sample_positions(len(source), max(targets, 5000), int(rng.integers(0, 2**63)))
    sample = source.iloc[positions].reset_index(drop=True)
    at = np.full(len(source), -1, dtype=np.int64)
    at[positions] = np.arange(len(positions))
    ranges = {c: float(source[c].max() - source[c].min()) for c in ("age", "height", "weight")}
    return run_attacks(
        sample,
        release,
        known=KNOWN,
        sensitive=SENSITIVE,
        targets=targets,
        rng=rng,
        lineage=at[lineage],
        ranges=ranges,
    ).to_dict()


def test_linkage_and_inference_are_the_in_memory_figures(files):
    folder, source, release, lineage = files
    ours = on_duckdb(folder, lineage=True)
    memory = in_memory(source, release, lineage)
    assert ours["lineage"] == WITH_LINEAGE
    # rates rounded to 6 decimals, as reported
    assert ours["linkage"] == memory["linkage"]
    assert ours["linkage"]["targets"] == 600
    assert ours["inference"] == memory["inference"]


def test_without_the_lineage_noisy_own_rows_were_missed(files):
    folder, *_ = files
    blind = on_duckdb(folder, lineage=False)
    seen = on_duckdb(folder, lineage=True)
    assert blind["lineage"] == NO_LINEAGE
    # a noisy age rarely agrees with the person's own: the lineage finds those links
    assert seen["linkage"]["rate"] > blind["linkage"]["rate"] + 0.01


def test_own_rows_are_found_among_the_counted_combinations():
    combos = pd.DataFrame({"age": [30.0, 41.0, 30.0], "sex": ["F", "M", None]})
    own = pd.DataFrame({"age": [41, 30, 30, 99], "sex": ["M", None, "F", "F"]})
    assert own_combinations(combos, own).tolist() == [1, 2, 0, -1]


def test_a_lineage_goes_with_the_release_it_numbers():
    source, release, lineage = source_and_release(50, 3)
    from anonweb.core.attacks.records import release_combos

    combos = release_combos(release[KNOWN], KNOWN)
    with pytest.raises(ParameterError, match="own"):
        run_attacks(source, combos, known=KNOWN, rng=np.random.default_rng(0), lineage=lineage)
    with pytest.raises(ParameterError, match="own goes with"):
        run_attacks(
            source, release, known=KNOWN, rng=np.random.default_rng(0), own=np.zeros(50, int)
        )
