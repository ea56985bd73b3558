"""What-if on a dataset without a job: the encoded table is built once per process and kept.

The table is encoded over the tagged quasi-identifiers (each with its current hierarchy, or the
one the plan page would suggest) and sensitive columns. The key names everything the encoding
depends on (the raw file, the tags, the hierarchies' digests, the population size, the metric),
so a change of any of them encodes afresh; only a few tables are kept, the least recently used
dropped first.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

import pandas as pd

from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import resolve_hierarchies
from anonweb.core.raw_values import public_result
from anonweb.core.search.whatif import WhatIfTable
from anonweb.datasets.hierarchy_suggestion import suggest_hierarchy
from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import hierarchies_for, plan_with_hierarchies
from anonweb.datasets.storage import load_distinct, load_frame, load_histogram

MAX_TABLES = 3
_tables: OrderedDict[tuple, Any] = OrderedDict()
_lock = threading.Lock()
_building: dict[tuple, threading.Lock] = {}


def whatif_specs(dataset: Dataset) -> dict[str, dict]:
    """The hierarchy spec of each quasi-identifier, uploaded tables resolved to their rows."""

    stored = hierarchies_for(dataset=dataset)
    specs = {}
    for column in dataset.quasi_identifiers:
        sample = None if column in stored else load_distinct(dataset.storage_key, column)
        specs[column] = suggest_hierarchy(dataset, column, sample, stored=stored)
    return plan_with_hierarchies(dataset=dataset, plan={"hierarchies": specs})["hierarchies"]


def _key(dataset: Dataset, specs: dict, metric: str, aggregate: str | None) -> tuple:
    text = json.dumps(specs, sort_keys=True, ensure_ascii=False, default=str)
    return (
        dataset.pk,
        str(dataset.storage_key),
        tuple(dataset.quasi_identifiers),
        tuple(dataset.sensitive),
        hashlib.sha256(text.encode()).hexdigest(),
        dataset.population_size,
        metric,
        aggregate,
    )


def whatif_table(dataset: Dataset, *, metric: str = "loss", aggregate: str | None = None):
    """The dataset's :class:`~anonweb.core.search.whatif.WhatIfTable`, encoded on first use."""

    if not dataset.quasi_identifiers:
        raise ParameterError("tag at least one column as a quasi-identifier to try levels")
    specs = whatif_specs(dataset)
    key = _key(dataset, specs, metric, aggregate)
    with _lock:
        if key in _tables:
            _tables.move_to_end(key)
            return _tables[key]
        building = _building.setdefault(key, threading.Lock())
    with building:  # two first requests for one table encode it once
        with _lock:
            if key in _tables:
                return _tables[key]
        source, hierarchies = _source(dataset, specs)
        table = WhatIfTable(
            source,
            quasi_identifiers=dataset.quasi_identifiers,
            hierarchies=hierarchies,
            sensitive=dataset.sensitive,
            population_size=dataset.population_size,
            metric=metric,
            aggregate=aggregate,
        )
        with _lock:
            _tables[key] = table
            _building.pop(key, None)
            while len(_tables) > MAX_TABLES:
                _tables.popitem(last=False)
    return table


def _source(dataset: Dataset, specs: dict) -> tuple[Any, dict[str, Hierarchy]]:
    """What the table is encoded from, and the hierarchies resolved: the histogram of a large
    table (read by DuckDB: memory of its classes, not its rows), else the table in memory."""
    qis = list(dataset.quasi_identifiers)
    sensitive = [s for s in dict.fromkeys(dataset.sensitive) if s not in qis]
    hist = load_histogram(dataset.storage_key, qis, sensitive)
    if hist is None:
        df = load_frame(dataset.storage_key, columns=qis + sensitive)
        return df, resolve_hierarchies(specs, df)
    # a builder reads only a column's distinct values: the histogram's labels are those
    hierarchies = {}
    for column, spec in specs.items():
        values = pd.DataFrame({column: hist.labels[column]})
        hierarchies.update(resolve_hierarchies({column: spec}, values))
    return hist, hierarchies


def whatif_forget(dataset_id: int | None = None) -> None:
    """Drop the kept tables (of one dataset, or all)."""
    with _lock:
        for key in [k for k in _tables if dataset_id is None or k[0] == dataset_id]:
            del _tables[key]


def parse_request(body: Any) -> dict[str, Any]:
    """``{"levels": {COL: LEVEL}, "suppression": FRACTION, "k": K}`` checked for types; the
    ranges are checked by the core against the table."""
    if not isinstance(body, dict):
        raise ParameterError('send a JSON object: {"levels": {column: level}, "suppression": 0.02}')
    unknown = sorted(set(body) - {"levels", "suppression", "k"})
    if unknown:
        raise ParameterError(f"unknown field(s): {', '.join(unknown)}")
    levels = body.get("levels", {})
    if not isinstance(levels, dict):
        raise ParameterError("'levels' must map quasi-identifiers to hierarchy levels")
    suppression = body.get("suppression", 0.0)
    if isinstance(suppression, bool) or not isinstance(suppression, int | float):
        raise ParameterError(f"'suppression' must be a fraction of rows, got {suppression!r}")
    k = body.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ParameterError(f"'k' must be a positive integer, got {k!r}")
    return {"levels": levels, "suppression": float(suppression), "k": k}


def whatif_evaluate(dataset: Dataset, body: Any, *, raw_labels: bool) -> dict[str, Any]:
    """The what-if JSON for a request body. ``raw_labels`` adds an example label per level
    (level 0 is a value of the source: privacy officers only)."""
    args = parse_request(body)
    table = whatif_table(dataset)
    result = table.evaluate(args["levels"], suppression=args["suppression"], k=args["k"]).to_dict()
    result["heights"] = table.heights
    if raw_labels:
        result["level_names"] = table.level_names()
        return result
    # the labels and the classes that disclose a value are described by values of the source
    public: dict[str, Any] = public_result(result)
    return public
