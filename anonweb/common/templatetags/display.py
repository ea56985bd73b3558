"""Parameters, plans and audit details for reading: nested JSON values as tables.

One filter for every page that shows such a value (``{{ value|as_table }}``), so that a plan, a
job's parameters and an audit event's details read the same way. Every key and value is escaped;
strings keep their letters (no ``\\u00e9``).
"""

from __future__ import annotations

import json

from django import template
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# Deeper than this, the rest is shown as compact JSON: a stored value cannot blow up the page.
MAX_DEPTH = 8


def _scalar(value) -> str:
    if value is None:
        return "—"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _is_scalar(value) -> bool:
    return not isinstance(value, dict | list | tuple)


def render_value(value, depth: int = 0) -> SafeString:
    if depth >= MAX_DEPTH and not _is_scalar(value):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return format_html('<code class="wrap">{}</code>', text)
    if isinstance(value, dict):
        if not value:
            return mark_safe('<span class="meta">—</span>')
        rows = format_html_join(
            "",
            '<tr><th scope="row">{}</th><td>{}</td></tr>',
            ((str(k), render_value(v, depth + 1)) for k, v in value.items()),
        )
        return format_html('<table class="kv"><tbody>{}</tbody></table>', rows)
    if isinstance(value, list | tuple):
        if not value:
            return mark_safe('<span class="meta">—</span>')
        if all(_is_scalar(v) for v in value):
            return conditional_escape(", ".join(_scalar(v) for v in value))
        items = format_html_join("", "<li>{}</li>", ((render_value(v, depth + 1),) for v in value))
        return format_html('<ol class="kv-list">{}</ol>', items)
    return conditional_escape(_scalar(value))


@register.filter
def as_table(value) -> SafeString:
    """A JSON-like value (dicts, lists, scalars) as nested key/value tables, escaped."""
    return render_value(value)


@register.filter
def people(value) -> str:
    """A figure as people read it (:func:`anonweb.core.numbers.for_people`)."""
    from anonweb.core.numbers import for_people

    try:
        return for_people(float(value) if isinstance(value, str) else value)
    except ValueError:
        return str(value)


@register.filter
def probability(value) -> str:
    """A small probability such as δ: ``9.4e-7`` (:func:`anonweb.core.numbers.probability`)."""
    from anonweb.core.numbers import probability as written

    try:
        return written(value)
    except (TypeError, ValueError):
        return str(value)
