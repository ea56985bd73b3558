"""A starting hierarchy for a quasi-identifier: the one set on the dataset, else a builder that
fits the column's values (the plan suggestion and the hierarchy wizard both start from it)."""

from __future__ import annotations

import copy
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
    return _fitted(dataset.storage_key, column, sample)


# A column's fitted builder is a function of its values, which never change under the dataset's
# storage key (every caller passes that file's values of the column): found once per process
# and column, not on every view of the plan page (pandas' string tests over each
# quasi-identifier's values were a fifth of its time). A few hundred columns are kept.
FITTED_KEPT = 512
_fitted_kept: dict[tuple[str, str], dict[str, Any]] = {}


def _fitted(storage_key: Any, column: str, sample: pd.Series) -> dict[str, Any]:
    key = (str(storage_key), column)
    found = _fitted_kept.get(key)
    if found is None:
        found = _fit(column, sample)
        while len(_fitted_kept) >= FITTED_KEPT:
            _fitted_kept.pop(next(iter(_fitted_kept)), None)
        _fitted_kept[key] = found
    return copy.deepcopy(found)  # a plan built from it may be edited


def _fit(column: str, sample: pd.Series) -> dict[str, Any]:
    """A builder that fits the column's values (``sample``: the column or its distinct values)."""
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
