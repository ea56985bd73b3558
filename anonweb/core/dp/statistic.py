"""The declaration of a DP statistic, and the one registry of them.

A :class:`Statistic` says everything the application does with one kind of statistic: the
columns and parameters it takes, how OpenDP's measurement is built and run, the columns of the
table it releases, its accuracy sentence, its chart, its released figures with their labels and
the same figures on the source (for the utility table). The mechanisms, the plan schema of the
``dp_release`` step, the charts, the utility table and ``manage.py dp-release`` all read this
registry, so a statistic is added by registering one declaration
(:mod:`anonweb.core.dp.kinds` holds the built-in ones).

This module imports nothing of the DP wing: the functions a declaration holds are typed loosely
here and precisely where they are written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anonweb.core.errors import ParameterError

# The parameters a statistic may take besides ``kind``, ``epsilon``, ``columns`` and the unit of
# privacy; the plan schema shows each one for the statistics that take it.
OPTIONAL_PARAMETERS = ("categories", "delta", "bounds", "alphas", "bins")


@dataclass(frozen=True)
class Statistic:
    """One kind of DP statistic.

    ``columns``: how many columns it reads (0, 1, or None for one or more). ``parameters``: which
    of :data:`OPTIONAL_PARAMETERS` it takes. ``check(query)`` refuses a combination the schema
    cannot express (ParameterError). ``build(query, d_in)`` returns the prepared OpenDP
    measurement (no data read); ``run(prepared, rows)`` runs it and returns the released table
    and what only the release knows; ``output_columns(query)`` the released table's columns.
    ``accuracy(entry, level)`` the sentence stating its accuracy from its report entry (and
    the part only a release can say, after the preview's); ``chart(entry, part)`` a plotly figure
    or None; ``figures(entry, part, stat)`` its released figures, each made by
    ``stat(label, value, half, interval, bounds=None)``; ``truth(query, source)`` each figure's
    value on the source with how far contribution bounding may leave it short, or None when it
    cannot be stated. ``report_keys``: keys of its report entry, besides the common ones, that
    show only public parameters or released figures (the published report keeps them).
    ``cli_metavar`` and ``cli_help`` describe its ``dp-release`` flag."""

    kind: str
    build: Callable[[Any, int], Any]
    run: Callable[[Any, Any], tuple[Any, dict[str, Any]]]
    output_columns: Callable[[Any], list[str]]
    accuracy: Callable[[Mapping[str, Any], str], tuple[str, str]]
    columns: int | None = 1
    parameters: frozenset[str] = field(default_factory=frozenset)
    check: Callable[[Any], None] | None = None
    chart: Callable[[Mapping[str, Any], Any], Any] | None = None
    figures: Callable[[Mapping[str, Any], Any, Callable[..., Any]], list[Any]] | None = None
    truth: Callable[[Any, Any], dict[str, tuple[float, float]] | None] | None = None
    report_keys: tuple[str, ...] = ()
    cli_metavar: str = "COL"
    cli_help: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.parameters) - set(OPTIONAL_PARAMETERS)
        if unknown:
            raise ValueError(f"statistic {self.kind!r} names unknown parameters {sorted(unknown)}")
        if self.columns not in (0, 1, None):
            raise ValueError(f"statistic {self.kind!r}: columns must be 0, 1 or None")


_REGISTRY: dict[str, Statistic] = {}
_ON_REGISTER: list[Callable[[], None]] = []


def register_statistic(statistic: Statistic) -> Statistic:
    """Add ``statistic`` (a kind registers once; the same declaration again is a no-op)."""
    existing = _REGISTRY.get(statistic.kind)
    if existing is not None and existing != statistic:
        raise ValueError(f"DP statistic {statistic.kind!r} is already registered")
    _REGISTRY[statistic.kind] = statistic
    for hook in _ON_REGISTER:
        hook()
    return statistic


def unregister_statistic(kind: str) -> None:
    """Remove a kind (for a statistic registered only for a while, as a test does)."""
    if _REGISTRY.pop(kind, None) is not None:
        for hook in _ON_REGISTER:
            hook()


def on_register(hook: Callable[[], None]) -> None:
    """Call ``hook`` now and whenever the registry changes (what is built from it, such as the
    plan schema, is rebuilt)."""
    _ON_REGISTER.append(hook)
    hook()


def statistic_kinds() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def statistics() -> tuple[Statistic, ...]:
    return tuple(_REGISTRY.values())


def find_statistic(kind: object) -> Statistic | None:
    return _REGISTRY.get(kind) if isinstance(kind, str) else None


def get_statistic(kind: object) -> Statistic:
    found = find_statistic(kind)
    if found is None:
        known = ", ".join(_REGISTRY)
        raise ParameterError(f"DP release kind must be one of {known}, not {kind!r}")
    return found


def kinds_taking(parameter: str) -> list[str]:
    """The statistics that take ``parameter`` (``"columns"``: those that read a column)."""
    if parameter == "columns":
        return [s.kind for s in _REGISTRY.values() if s.columns != 0]
    return [s.kind for s in _REGISTRY.values() if parameter in s.parameters]
