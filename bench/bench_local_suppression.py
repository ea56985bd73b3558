"""Local suppression against the search's record suppression on ARX's Adult (8 QIs).

For k = 5 and 10: the optimal full-domain generalization with a suppression limit (ARX's
hierarchies) and how many records it suppresses (x 8 cells each); then, at the same node without
record suppression, the cells local suppression blanks instead; and local suppression alone on
the ungeneralized table. Run: ``PYTHONPATH=. python bench/bench_local_suppression.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anonweb.core.io.frame import read_table  # noqa: E402
from anonweb.core.io.hierarchy import read_hierarchy  # noqa: E402
from anonweb.core.search.flash import optimal_generalization  # noqa: E402
from anonweb.core.transforms.local_suppression import local_suppression  # noqa: E402

DATA = Path(os.environ.get("ANONWEB_SHARED_DIR", "/work/shared")) / "datasets" / "arx"
QI8 = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


def main() -> None:
    df = read_table(DATA / "adult.csv", sep=";")
    hierarchies = {q: read_hierarchy(DATA / f"adult_hierarchy_{q}.csv", attribute=q) for q in QI8}
    for k in (5, 10):
        started = time.perf_counter()
        found = optimal_generalization(
            df, quasi_identifiers=QI8, hierarchies=hierarchies, k=k, suppression=0.02
        )
        t_search = time.perf_counter() - started
        cells = found.suppressed * len(QI8)
        print(
            f"k={k}: search (2% limit) node {found.levels}: {found.suppressed} records suppressed "
            f"({cells} cells, {found.suppressed / len(df):.2%} of records), {t_search:.1f} s"
        )
        at_node = optimal_generalization(
            df,
            quasi_identifiers=QI8,
            hierarchies=hierarchies,
            k=1,
            levels=found.levels,
        ).apply(df)
        started = time.perf_counter()
        blanks = local_suppression(at_node, quasi_identifiers=QI8, k=k)
        t_local = time.perf_counter() - started
        print(
            f"k={k}: local suppression at the same node: {blanks.cells} cells blanked in "
            f"{blanks.to_dict()['records_touched']} records, {t_local:.1f} s; "
            f"per column {blanks.to_dict()['cells_blanked_per_column']}"
        )
        started = time.perf_counter()
        raw = local_suppression(df, quasi_identifiers=QI8, k=k)
        print(
            f"k={k}: local suppression of the ungeneralized table: {raw.cells} cells blanked in "
            f"{raw.to_dict()['records_touched']} records "
            f"({raw.cells / (len(df) * len(QI8)):.2%} of QI cells), "
            f"{time.perf_counter() - started:.1f} s"
        )


if __name__ == "__main__":
    main()
