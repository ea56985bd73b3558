"""The row-wise part of a search's release, for an engine to write: what each quasi-identifier's
values become at the chosen node, and which generalized classes the models suppressed.

:meth:`SearchResult.apply` writes the same table from a DataFrame in memory; this hands the same
decisions to any engine (:mod:`anonweb.core.engine`), which then writes the release without the
table ever being held whole.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from anonweb.core.engine.base import ColumnMapping, NodeRelease
from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.search.flash import SearchResult
from anonweb.core.search.lattice import encode_qi


def node_release(
    result: SearchResult, hist: Histogram, hierarchies: Mapping[str, Hierarchy]
) -> NodeRelease:
    """The node of ``result`` (a :func:`search_histogram` of ``hist``) as an engine writes it.

    As :meth:`SearchResult.apply`: a generalized or suppressed column is text throughout (the
    hierarchy's labels), a column left at level 0 with nothing suppressed keeps its type.
    """
    if len(result.row_suppressed) != hist.cells:
        raise ParameterError("the search result was not made from this histogram")
    suppressed_cells = np.asarray(result.row_suppressed, dtype=bool)
    any_suppressed = bool(suppressed_cells.any())
    mappings = []
    # the generalized values of the suppressed cells only: a value object per cell and QI
    # would cost 8 bytes a cell each (10^8 records: 8.9 M cells)
    at_suppressed = {}
    for name in result.quasi_identifiers:
        level = result.levels[name]
        values = hist.labels[name]
        q = encode_qi(pd.Series(values, name=name), hierarchies[name])
        labels = q.labels[level][q.level_codes[level][q.row_index]]
        text = tuple(None if pd.isna(v) else str(v) for v in labels)
        if any_suppressed:
            at_suppressed[name] = np.asarray(text, dtype=object)[hist.codes[name][suppressed_cells]]
        if level > 0 or any_suppressed:
            mappings.append(ColumnMapping(name, values, text))
    suppressed = None
    if any_suppressed:
        # every cell of a suppressed class is suppressed: its generalized values name the class
        frame = pd.DataFrame({q: at_suppressed[q] for q in result.quasi_identifiers})
        suppressed = frame.drop_duplicates(ignore_index=True)
    return NodeRelease(
        mappings=tuple(mappings),
        quasi_identifiers=tuple(result.quasi_identifiers),
        suppressed=suppressed,
    )
