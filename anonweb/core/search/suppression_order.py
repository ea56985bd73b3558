"""The order in which a node's table-wide models take classes of one size for suppression.

:func:`anonweb.core.models.table_wide.table_wide_suppression` suppresses the smallest classes
first. Among classes of one size ARX takes the one of least information loss under the metric
(its Loss; for the metrics whose per-class loss follows from the size alone it skips this
step), then the one whose first record comes first. A record's position is not something every
engine has (a histogram counts cells, not records in order), so the last step here is the
class's generalized values in hierarchy order, the same whether the classes were grouped from
a table in memory or from an engine's histogram. The search and the what-if both order classes
by :func:`tie_keys`, so they suppress the same classes of a node, however they formed them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.search.lattice import EncodedTable
from anonweb.core.search.metrics import Metric


def tie_keys(
    metric: Metric,
    table: EncodedTable,
    levels: Sequence[int] | NDArray[Any],
    rep: NDArray[Any],
    sizes: NDArray[Any],
) -> list[NDArray[Any]]:
    """The keys ordering classes of one size at node ``levels`` (each represented by its
    distinct row ``rep``, of ``sizes`` records), most significant first."""
    keys: list[NDArray[Any]] = []
    values = metric.class_values(levels, rep, sizes)
    if values is not None:
        keys.extend(metric.key(values).T)
    keys.extend(np.asarray(table.level_codes(i, int(lv), rep)) for i, lv in enumerate(levels))
    return keys
