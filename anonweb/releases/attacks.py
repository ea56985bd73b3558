"""A release's attack figures (linkage, inference, singling out, membership) and what all the
live releases of its source reconstruct together: measured by the job that published it (the
internal report's ``attacks`` and ``reconstruction``) or again on demand (a job whose figures
are kept beside the lineage, never in the release's files). They are computed from the source,
so only the team's privacy officers and data stewards read them; which records are
reconstructed, only officers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from django.utils import timezone

from anonweb.core.attacks.options import attack_options
from anonweb.core.attacks.reconstruction import reconstruction_report
from anonweb.core.attacks.release import attack_release
from anonweb.core.attacks.run import DEFAULT_TARGETS
from anonweb.core.conflicts.release import EarlierRelease, release_label
from anonweb.core.errors import DataError
from anonweb.core.release.make import attacked_columns
from anonweb.core.release.plan import plan_from_dict
from anonweb.datasets.models import Dataset
from anonweb.releases.conflicts import earlier_releases, label_for
from anonweb.releases.models import Release
from anonweb.releases.storage import (
    load_lineage,
    read_private_array,
    read_private_json,
    read_release_table,
    write_private_array,
    write_private_json,
)

ON_DEMAND_FILE = "attacks.json"  # beside the lineage: the latest on-demand run
CONTROL_FILE = "control_rows.npy"  # the source rows held out of the release as its control
AGGREGATES_ONLY = "the release publishes aggregates, not records"

Progress = Callable[[int, str], None]


def release_attacks_get(*, release: Release) -> dict[str, Any] | None:
    """The attack figures (with ``reconstruction``): the latest on-demand run's, else the
    publishing job's; None for a release that has neither. The caller checks the reader."""
    latest = read_private_json(release.storage_key, ON_DEMAND_FILE)
    if isinstance(latest, dict):
        return latest
    report = release.report or {}
    attacks = report.get("attacks")
    reconstruction = report.get("reconstruction")
    if not isinstance(attacks, dict) and not isinstance(reconstruction, dict):
        return None
    out = dict(attacks) if isinstance(attacks, dict) else {"skipped": AGGREGATES_ONLY}
    if isinstance(reconstruction, dict):
        out["reconstruction"] = reconstruction
    return out


def save_control_rows(*, release: Release, control_rows: np.ndarray | None) -> None:
    """Keep which source rows were held out as the control, so later runs use the same."""
    if control_rows is None:
        return
    write_private_array(release.storage_key, CONTROL_FILE, np.asarray(control_rows, dtype=np.int64))


def _control_rows(release: Release) -> np.ndarray | None:
    return read_private_array(release.storage_key, CONTROL_FILE)


def release_attacks_run(*, release: Release, source: pd.DataFrame, progress: Progress) -> dict:
    """Attack an existing release again (the on-demand job's work): the record-level attacks
    against the control held out when it was made (if one was), and the reconstruction from
    every live release of its source. The figures are written beside the lineage."""
    dataset = release.dataset
    lineage = load_lineage(release.storage_key, label=release_label(release.version))
    plan = release.plan or {}
    progress(10, "reading the release")
    attacks: dict[str, Any]
    published = lineage.frame
    synthetic = any(s.get("kind") == "dp_synthetic" for s in plan.get("steps", []))
    if published is None and synthetic:
        published = read_release_table(release.storage_key)
    if published is None:
        attacks = {"skipped": AGGREGATES_ONLY}
    else:
        control_rows = _control_rows(release)
        attacked, control, rows = source, None, lineage.rows
        if control_rows is not None and control_rows.size:
            kept = np.setdiff1d(np.arange(len(source)), control_rows)
            attacked = source.iloc[kept].reset_index(drop=True)
            control = source.iloc[np.sort(control_rows)].reset_index(drop=True)
            if rows is not None:
                rows = np.searchsorted(kept, rows)
        options = attack_options(plan["attacks"]) if plan.get("attacks") else None
        rng = np.random.default_rng()

        def step(fraction: float, what: str) -> None:
            progress(15 + int(60 * fraction), what)

        known, sensitive = attacked_columns(
            plan_from_dict(plan), dict(dataset.tags or {}), dataset.column_names, options
        )
        attacks = attack_release(
            attacked,
            published,
            known=known,
            sensitive=sensitive,
            control=control,
            lineage=rows,
            targets=options.targets if options else DEFAULT_TARGETS,
            rng=rng,
            progress=step,
        )
    progress(80, "reconstructing values from every live release of the source")
    attacks["reconstruction"] = release_reconstruction(
        dataset=dataset, source=source, release=release
    )
    attacks["run_at"] = timezone.now().isoformat(timespec="seconds")
    if Dataset.objects.filter(pk=dataset.pk, purged_at__isnull=False).exists():
        # Purged while this ran: the figures quote the source, so they are not kept.
        raise DataError(f"the raw data of {dataset.name} was purged while the attacks ran")
    write_private_json(release.storage_key, ON_DEMAND_FILE, attacks)
    return {
        "release_id": release.pk,
        "reconstructed": attacks["reconstruction"]["determined"],
    }


def release_reconstruction(
    *,
    dataset,
    source: pd.DataFrame,
    release: Release | None = None,
) -> dict[str, Any]:
    """The records whose values the published aggregates of all the live releases of the
    source (approved or awaiting review, and ``release`` even if rejected) determine together,
    column by column (:func:`anonweb.core.attacks.reconstruction.reconstruction_report`). A
    release being written is measured with the others by the core's release path."""
    earlier = earlier_releases(dataset=dataset)
    if release is not None and release.pk not in {e.id for e in earlier}:
        # a rejected release is attacked with the live ones; one whose lineage cannot be read is
        # left out, as an unreadable live one is
        label = label_for(release, dataset)
        try:
            lineage = load_lineage(release.storage_key, label=label)
        except (OSError, ValueError, DataError) as exc:
            earlier.append(EarlierRelease(label, release.status, release.pk, error=str(exc)))
        else:
            earlier.append(
                EarlierRelease(
                    label,
                    release.status,
                    release.pk,
                    aggregates=lineage.aggregates,
                    dp=lineage.dp,
                )
            )
    return reconstruction_report(
        source, [(e.label, e.aggregates, e.dp) for e in earlier if e.error is None]
    )
