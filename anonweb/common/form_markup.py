"""An unbound form's fields, rendered once per process for each shape of the form.

Django draws every widget through its templates (an include per attribute set, per option): the
plan page's suggestion form costs about 2 ms, the release page's link form half a millisecond,
on every view, for the same markup. An unbound form's markup is a function of what its fields
declare (names, labels, help, choices, initial values, widgets and their attributes) and of the
form's prefix and ids, so it is kept under a digest of exactly those; a bound form (a refused
POST, a GET with parameters) shows what was sent and is drawn every time."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from django import forms
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from anonweb.common.charts import builds

# Process-local: the markup depends on the code and the arguments only, never on stored data.
_KEPT: dict[str, SafeString] = {}
_KEPT_MAX = 512
_LOCK = threading.Lock()


def _plain(value: Any) -> Any:
    """``value`` with every leaf a plain value (lazy texts as the text they give)."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return (type(value).__name__, str(value))


def _choices(field: forms.Field) -> Any:
    choices = getattr(field, "choices", None)
    return None if choices is None else list(choices)


def _shape(form: forms.BaseForm) -> str:
    fields = []
    for bound in form:
        field = bound.field
        widget = field.widget
        fields.append(
            (
                bound.html_name,
                bound.auto_id,
                type(field).__qualname__,
                str(bound.label),
                str(field.help_text),
                field.required,
                field.disabled,
                _plain(bound.value()),
                _plain(_choices(field)),
                type(widget).__module__ + "." + type(widget).__qualname__,
                _plain(widget.attrs),
                _plain(field.widget_attrs(widget)),
                _plain(bound.build_widget_attrs({})),
                widget.is_hidden,
            )
        )
    text = repr(
        (
            type(form).__module__ + "." + type(form).__qualname__,
            form.prefix,
            _plain(form.auto_id),
            str(form.label_suffix),
            tuple(fields),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _draw(form: forms.BaseForm) -> SafeString:
    builds["form-fields"] += 1
    # as the templates wrote it: <label>{{ field.label }} {{ field }}</label> for each field
    return format_html_join("", "<label>{} {}</label>", ((b.label, b) for b in form))


def form_fields_html(form: forms.BaseForm) -> SafeString:
    """``<label>LABEL WIDGET</label>`` for each field of ``form``, labels escaped: drawn once
    per shape for an unbound form (see the module), every time for a bound one."""
    if form.is_bound:
        return _draw(form)
    key = _shape(form)
    html = _KEPT.get(key)
    if html is None:
        html = _draw(form)
        with _LOCK:
            if len(_KEPT) >= _KEPT_MAX:
                _KEPT.clear()
            _KEPT[key] = html
    return html
