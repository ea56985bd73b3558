"""Attacks as part of making a release: the control held out before the plan runs, and the
attacks run on what was published (the internal report's ``attacks``; never the published
report, since the figures are computed from the source)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.attacks.options import AttackOptions
from anonweb.core.attacks.run import NO_CONTROL, Progress, run_attacks

MIN_CONTROL = 20


def hold_out(
    frame: pd.DataFrame, options: AttackOptions | None, *, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame | None, NDArray[np.int64] | None]:
    """The records the plan runs on, the control kept out of the release, and the source row of
    each record kept (None when nothing is held out)."""
    if options is None or options.holdout <= 0:
        return frame, None, None
    held = int(round(options.holdout * len(frame)))
    if held < MIN_CONTROL or len(frame) - held < MIN_CONTROL:
        return frame, None, None
    order = rng.permutation(len(frame))
    kept = np.sort(order[held:]).astype(np.int64)
    control = frame.iloc[np.sort(order[:held])].reset_index(drop=True)
    return frame.iloc[kept].reset_index(drop=True), control, kept


def attack_release(
    source: pd.DataFrame,
    published: pd.DataFrame,
    *,
    known: Sequence[str],
    sensitive: Sequence[str],
    control: pd.DataFrame | None,
    lineage: NDArray[Any] | None,
    targets: int,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The attacks' figures for the internal report, or why they were not run."""
    shared = set(source.columns) & set(published.columns)
    known = [c for c in dict.fromkeys(known) if c in shared]
    sensitive = [c for c in dict.fromkeys(sensitive) if c in shared and c not in known]
    if not known:
        return {
            "skipped": "no column the attacker would know (the quasi-identifiers, or the plan's "
            "'attacks' known columns) is in the release"
        }
    if len(published) == 0:
        return {"skipped": "the release has no rows"}
    report = run_attacks(
        source,
        published,
        known=known,
        sensitive=sensitive,
        control=control,
        targets=targets,
        rng=rng,
        lineage=lineage,
        progress=progress,
    )
    out = report.to_dict()
    out["control_records"] = 0 if control is None else len(control)
    if control is None:
        out["note"] = NO_CONTROL
    return out
