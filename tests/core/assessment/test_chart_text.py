"""Text from the data is never markup in a chart: plotly renders a subset of HTML in labels and
titles (``<a href>`` becomes a live external link), so labels, names and column names reach it
with ``&``, ``<`` and ``>`` as entities, which it displays as the characters."""

from __future__ import annotations

import json

from anonweb.core.assessment.charts import chart_text, risk_charts
from anonweb.core.utility.charts import utility_charts

LINK = '<a href="https://attacker.example/">click</a>'


def _categories(labels, counts):
    return {"kind": "categories", "labels": labels, "counts": counts, "total": sum(counts)}


def test_a_cell_value_with_a_link_is_shown_as_text_in_the_utility_charts():
    utility = {
        "columns": [
            {
                "column": f"note {LINK}",
                "kind": "categorical",
                "original": _categories([LINK, "R&D"], [3, 2]),
                "released": _categories([LINK, "*"], [3, 2]),
            }
        ]
    }
    (chart,) = utility_charts(utility)
    text = json.dumps(chart["figure"])
    assert "<a" not in text and "</a>" not in text
    assert chart["figure"]["data"][0]["x"] == [chart_text(LINK), "R&amp;D"]
    assert chart_text(LINK) in chart["figure"]["layout"]["title"]["text"]


def test_a_sensitive_column_named_with_markup_is_text_in_the_risk_charts():
    risk = {"homogeneity": {LINK: {"100%: disclosed": 4}}}
    figures = [c["figure"] for c in risk_charts(risk)]
    assert "<a" not in json.dumps(figures)
    assert figures[0]["data"][0]["x"] == [chart_text(LINK)]


def test_chart_text_turns_markup_into_entities():
    assert chart_text("<b>a & b</b>") == "&lt;b&gt;a &amp; b&lt;/b&gt;"
