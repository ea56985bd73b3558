"""What a hierarchy does to one column: per level, its groups and the records in each.

The hierarchy wizard shows this before a hierarchy is saved: for each level the number of groups
(the classes the column alone would form), the smallest and largest, a sample of groups with
their values and records, and the values the hierarchy does not list (which a search or a
generalization would refuse). Computed from the column's value counts, never its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.io.hierarchy import UNCOVERED, Hierarchy


def json_value(value: object) -> object:
    """A value as JSON-safe Python (NumPy scalars plain, anything else as text)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


@dataclass(frozen=True)
class HierarchyPreview:
    height: int
    levels: tuple[dict[str, Any], ...]
    uncovered: tuple[dict[str, Any], ...]
    uncovered_values: int
    uncovered_records: int
    missing_records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "height": self.height,
            "levels": list(self.levels),
            "uncovered": list(self.uncovered),
            "uncovered_values": self.uncovered_values,
            "uncovered_records": self.uncovered_records,
            "missing_records": self.missing_records,
            "covered": self.uncovered_values == 0,
        }


def _natural(label: object) -> tuple[int, float, str]:
    text = str(label)
    for prefix in ("[", "<", ">="):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    head = text.split(",")[0].split("-")[0].strip()
    try:
        return (0, float(head), str(label))
    except ValueError:
        return (1, 0.0, str(label))


def hierarchy_preview(
    hierarchy: Hierarchy,
    values: pd.Series | NDArray[Any],
    counts: NDArray[Any] | list[int],
    *,
    missing: int = 0,
    limit: int = 30,
) -> HierarchyPreview:
    """Preview ``hierarchy`` on a column given as its distinct ``values`` and the records
    holding each (``counts``), plus ``missing`` records with no value. ``limit`` caps the
    groups listed per level (the smallest first: the ones a search would suppress) and the
    uncovered values listed."""
    counts = np.asarray(counts, dtype=np.int64)
    values = pd.Series(values)
    rows = hierarchy.rows_of(values)
    found = rows >= 0
    uncovered_idx = np.flatnonzero(rows == UNCOVERED)
    order = uncovered_idx[np.argsort(-counts[uncovered_idx], kind="stable")][:limit]
    uncovered = tuple(
        {"value": json_value(values.iloc[i]), "records": int(counts[i])} for i in order
    )
    levels = []
    hrows = hierarchy.rows
    covered_rows, covered_counts = rows[found], counts[found]
    for level in range(hierarchy.height):
        labels = np.array([r[level] for r in hrows], dtype=object)[covered_rows]
        frame = pd.DataFrame({"label": labels, "records": covered_counts})
        groups = frame.groupby("label", sort=False).agg(
            values=("records", "size"), records=("records", "sum")
        )
        if len(groups):
            shown = groups.sort_values("records", kind="stable").head(limit)
            listed = sorted(
                (
                    {"label": str(lab), "values": int(g["values"]), "records": int(g["records"])}
                    for lab, g in shown.iterrows()
                ),
                key=lambda d: _natural(d["label"]),
            )
            smallest, largest = int(groups["records"].min()), int(groups["records"].max())
        else:
            listed, smallest, largest = [], 0, 0
        levels.append(
            {
                "level": level,
                "groups": int(len(groups)),
                "smallest": smallest,
                "largest": largest,
                "example": str(hrows[0][level]) if hrows else "",
                "listed": listed,
            }
        )
    return HierarchyPreview(
        height=hierarchy.height,
        levels=tuple(levels),
        uncovered=uncovered,
        uncovered_values=int(len(uncovered_idx)),
        uncovered_records=int(counts[uncovered_idx].sum()),
        missing_records=int(missing),
    )
