"""The privacy models' figures of a sensitive column, as the model registry declares them.

``{% other_model_figures as figures %}`` lists the figures of the registered models that the
pages do not lay out by hand (those of models added after l-diversity, t-closeness and
δ-disclosure, e.g. β-likeness), each as :meth:`~anonweb.core.models.base.Figure.to_dict` gives
it; ``{{ sa|figure_value:figure }}`` shows one column's value (∞ for an infinite figure, — when
the report predates the model). Pass ``figures`` to a script with ``json_script``.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import floatformat

from anonweb.core.assessment.profile import BUILT_IN
from anonweb.core.models.registry import sensitive_figures

register = template.Library()


def other_figures() -> list[dict[str, Any]]:
    return [f.to_dict() for _cls, f in sensitive_figures() if f.key not in BUILT_IN]


@register.simple_tag
def other_model_figures() -> list[dict[str, Any]]:
    return other_figures()


@register.filter
def figure_value(profile: Any, figure: dict[str, Any]) -> str:
    if not isinstance(profile, dict) or figure["key"] not in profile:
        return "—"
    value = profile[figure["key"]]
    if value is None:
        return "∞"
    if isinstance(value, int):
        return str(value)
    return floatformat(value, figure["digits"])
