"""A starting hierarchy for a quasi-identifier: the one set on the dataset, else a builder that
fits the column's values (the plan suggestion and the hierarchy wizard both start from it)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import hierarchies_for, hierarchy_spec

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_DIGITS = re.compile(r"^\d+$")
_CODE_NAME = re.compile(r"zip|post(al)?.?code|plz|postcode", re.IGNORECASE)


def suggest_hierarchy(
    dataset: Dataset, column: str, sample: pd.Series, *, stored: dict | None = None
) -> dict[str, Any]:
    """The hierarchy set on the dataset if there is one, else a builder that fits the column's
    values (``sample``: the column, or only its distinct values). An uploaded table is referred
    to by digest, not copied: it may be megabytes, and the job resolves it when it runs.
    ``stored`` is :func:`~anonweb.datasets.selectors.hierarchies_for` of the dataset."""
    current = (stored if stored is not None else hierarchies_for(dataset=dataset)).get(column)
    if current is not None:
        if current.kind == "uploaded":
            return {"uploaded": current.sha256, "values": current.values, "levels": current.levels}
        spec = hierarchy_spec(dataset=dataset, column=column)
        if spec is not None:
            return spec
    values = sample.dropna()
    if _CODE_NAME.search(column) and len(values) and values.astype(str).str.len().nunique() == 1:
        return {"builder": "mask"}  # postal codes: mask digits from the right, not intervals
    if pd.api.types.is_numeric_dtype(sample):
        span = float(values.max() - values.min()) if len(values) else 0.0
        width = next((w for w in (1, 2, 5, 10, 20, 50, 100, 1000, 10000) if span / w <= 20), 100000)
        return {"builder": "interval", "width": width}
    text = values.astype(str)
    if len(text) and text.str.match(_ISO_DATE).all():
        return {"builder": "date"}
    if len(text) and text.str.match(_DIGITS).all() and text.str.len().nunique() == 1:
        return {"builder": "mask"}
    distinct = sorted(text.unique())
    if len(distinct) <= 5:
        # Few categories: the only sensible coarsening is to suppress the value.
        return {"rows": [[v, "*"] for v in distinct]}
    # Ordered groups are only a starting point: an officer should upload a semantic hierarchy.
    return {"builder": "grouping", "group_size": max(2, len(distinct) // 8), "fanout": 2}
