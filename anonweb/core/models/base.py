"""What every privacy model offers: one object per model, the checks everyone calls.

A model answers for each class at once (NumPy over all classes, never a loop): its figure
(:meth:`PrivacyModel.measure`: the class size, the number of distinct values, the distance, ...)
and whether the class satisfies it (:meth:`PrivacyModel.passes`). The threshold comparison is
written once, in the model, so the search, the assessment, the release report and the conflict
check cannot disagree on a boundary case.

A model whose ``per_class`` is false (average risk) is a property of the kept table as a whole:
:meth:`PrivacyModel.satisfied` decides it; when it fails, the smallest classes are suppressed
while the limit allows (:mod:`.table_wide`, ARX's rule).

``monotonic`` says whether the model stays satisfied when a node is generalized further *with
suppression*, which lets the search settle whole sublattices without checking them; a model
declared monotonic that is not makes the search return a worse node than the optimum.

A model class is also the one declaration of everything the rest of the app shows or asks about
it, so that adding a model is one module and one line in :mod:`.registry`:

* ``schema``: its parameters as a JSON Schema object (:mod:`anonweb.core.schema`); the plan's
  schema, the policy form and ``fields`` are derived from it;
* ``figures``: the :class:`Figure` objects it is judged by, per sensitive column (label, which
  direction is safer, how to measure it on classes): the risk profile, the what-if, the release
  comparison and the pages iterate them;
* ``cli_flags``: the :class:`CliFlag` objects of ``manage.py anonymize`` that ask for it;
* ``policy_code`` and :meth:`PrivacyModel.policy_message`: how the release gate words a release
  that fails it as a team-policy threshold.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.counts import ClassData

HIGHER = "higher"
LOWER = "lower"


@dataclass(frozen=True)
class Figure:
    """A figure of one sensitive column that a model is judged by, as reports and pages show it.

    ``key`` is its key in the column's risk profile (``risk.sensitive[col][key]``, JSON);
    ``measure`` gives the figure of each class from the classes and the column's name (None:
    the risk profile measures it with a builder of its own, as for t-closeness, whose distance
    depends on the column's type); the table's figure is the worst class's, by ``safer``.
    ``own_cell``: the profile table renders the figure in a cell of its own (with the recursive
    c or the t distance) rather than in the generic loop.
    """

    key: str
    label: str
    safer: str  # HIGHER or LOWER
    digits: int = 4  # significant digits shown
    unit: str = ""
    measure: Callable[[ClassData, str], NDArray[Any]] | None = None
    own_cell: bool = False

    def __post_init__(self) -> None:
        if self.safer not in (HIGHER, LOWER):
            raise ParameterError(f"a figure is safer {HIGHER!r} or {LOWER!r}, not {self.safer!r}")

    def table_value(self, per_class: NDArray[Any]) -> float | None:
        """The table's figure (the least safe class's); None without classes or when infinite
        (JSON has no infinity: pages show it as ∞)."""
        if len(per_class) == 0:
            return None
        value = float(per_class.min() if self.safer == HIGHER else per_class.max())
        return value if np.isfinite(value) else None

    def to_dict(self) -> dict[str, Any]:
        """What a page needs to show the figure (passed to scripts as JSON)."""
        return {
            "key": self.key,
            "label": self.label,
            "safer": self.safer,
            "digits": self.digits,
            "unit": self.unit,
        }


@dataclass(frozen=True)
class CliOption:
    """A further option a model's flag reads (``--population-size N``): its value, when given,
    becomes the spec's ``key``. Options of the same name are shared between models."""

    name: str
    help: str
    key: str
    value_type: Callable[[str], Any] = str

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class CliFlag:
    """A flag of ``manage.py anonymize`` that asks for a model.

    With ``per_column`` the flag repeats as ``--flag SA=VALUE`` and ``to_spec(column, value)``
    turns each into the model's JSON form; otherwise it is given once, ``--flag VALUE``,
    ``to_spec(None, value)``, the value already parsed by ``value_type``. ``to_spec`` raises
    :class:`ParameterError` for a value it cannot read (the command exits with status 2).
    ``options`` are further options whose values complete the spec (a population size).
    """

    name: str  # "--beta-likeness"
    help: str
    to_spec: Callable[[str | None, str], dict[str, Any]]
    per_column: bool = True
    value_type: Callable[[str], Any] | None = None
    options: tuple[CliOption, ...] = ()

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


def cli_number(text: str, option: str, kind: Callable[[str], Any] = float) -> Any:
    """A flag's number, or the one-line error the command line prints."""
    try:
        return kind(text)
    except ValueError:
        raise ParameterError(f"{option}: {text!r} is not a number") from None


@dataclass(frozen=True)
class ModelCheck:
    """A model checked on a table: satisfied or not, the table's figure and what fails."""

    model: dict[str, Any]
    description: str
    satisfied: bool
    value: float | None  # the table's figure: smallest k or l, largest t or δ, average risk
    failing_classes: int
    failing_records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": dict(self.model),
            "description": self.description,
            "satisfied": self.satisfied,
            "value": self.value,
            "failing_classes": self.failing_classes,
            "failing_records": self.failing_records,
        }


class PrivacyModel(ABC):
    """Base of the privacy models; subclasses are frozen dataclasses of their parameters."""

    kind: ClassVar[str]
    monotonic: ClassVar[bool]
    per_class: ClassVar[bool] = True
    # which end of the per-class figures is the table's figure: "min" (k, l) or "max" (t, δ)
    worst: ClassVar[str] = "min"
    fields: ClassVar[tuple[str, ...]]
    # its parameters in JSON form (the plan's schema entry); ``fields`` is derived from it
    schema: ClassVar[sch.Schema | None] = None
    figures: ClassVar[tuple[Figure, ...]] = ()
    cli_flags: ClassVar[tuple[CliFlag, ...]] = ()
    # other spellings a spec may use for a parameter (read as the parameter's own name)
    field_aliases: ClassVar[Mapping[str, str]] = {}
    # the release gate's finding code when the model is a team-policy threshold
    policy_code: ClassVar[str] = "risk_model"
    # whether a team policy may ask for it (not a model that needs a population table, which
    # a policy for every dataset of the team cannot name)
    policy_threshold: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("schema")
        if declared is not None and "fields" not in cls.__dict__:
            cls.fields = tuple(declared["properties"])

    @classmethod
    def optional_fields(cls) -> frozenset[str]:
        """The parameters a spec may leave out (the schema's non-required ones)."""
        if cls.schema is None:
            return frozenset()
        return frozenset(cls.fields) - frozenset(cls.schema.get("required", ()))

    @classmethod
    def from_spec(cls, params: Mapping[str, Any], hierarchies: Mapping[str, Any]) -> PrivacyModel:
        """The model from its checked parameters; ``hierarchies`` by column, for models that
        read a value hierarchy."""
        return cls(**params)

    # the sensitive column the model protects (None for k-anonymity and average risk)
    sensitive: str | None

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for reports: ``distinct 2-diversity on disease``."""

    @abstractmethod
    def measure(self, data: ClassData) -> NDArray[Any]:
        """The model's figure for each class."""

    @abstractmethod
    def passes(self, data: ClassData) -> NDArray[Any]:
        """For each class, whether it satisfies the model (all True for a table-wide model)."""

    @property
    def sizes_only(self) -> bool:
        """Whether the model judges classes by their sizes alone (then which of several
        classes of one size are suppressed changes no verdict of it)."""
        return False

    def for_table(self, rows: int) -> PrivacyModel:
        """The model for a table of ``rows`` records (a model whose check depends on the
        table's size, such as k-map's sampling fraction, binds it here; the search calls this
        with the input's rows). Itself by default."""
        return self

    def with_population(self, population: Any) -> PrivacyModel:
        """The model judged against ``population`` (a
        :class:`~anonweb.core.models.population_table.PopulationTable`, or None when none was
        given): a population-based model binds it here, refusing None if it needs one. Itself
        by default."""
        return self

    @property
    def population(self) -> Any:
        """The population table the model reads (None for the models that read none)."""
        return None

    def implied(self) -> tuple[PrivacyModel, ...]:
        """Monotonic models that every class satisfying this one satisfies too (necessary
        conditions): a search can settle whole sublattices with them before it checks this
        model itself. None by default."""
        return ()

    def least_suppressed(
        self, data: ClassData, settled: NDArray[Any], k: int = 1
    ) -> NDArray[Any] | None:
        """For a monotonic model that can say more than which classes fail it: per class, a
        lower bound on the records that the node, and every specialization of it, must
        suppress inside the class, whose sum over a node never grows as classes merge (see
        :mod:`.share_bound`); it may give 0 for the ``settled`` classes, already known to be
        suppressed whole. Every class kept holds at least ``k`` records (k-anonymity's k, 1
        without it). None by default: the records of the classes failing it."""
        return None

    def satisfiable_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int, max_out: int
    ) -> NDArray[Any] | None:
        """For a table-wide model: per table of classes (assigned by ``groups``, as in
        :meth:`satisfied_in_groups`), whether suppressing whole classes of at most ``max_out``
        records in all, whichever they are, could leave it satisfied. A necessary condition
        that merging classes (a generalization) never turns false, so a search settles every
        specialization of a table that fails it without checking them. None by default: the
        model offers no such condition."""
        return None

    def satisfied(self, data: ClassData) -> bool:
        """Whether the classes, as a table, satisfy the model."""
        return bool(self.satisfied_in_groups(data, np.zeros(len(data), dtype=np.int64), 1)[0])

    def satisfied_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int
    ) -> NDArray[Any]:
        """:meth:`satisfied` for several tables at once (the nodes of a search batch), the
        classes assigned to tables by ``groups``."""
        failing = np.bincount(groups, weights=~self.passes(data), minlength=n_groups)
        return np.asarray(failing == 0)

    def table_value(self, data: ClassData) -> float | None:
        """The table's figure (the worst class's, or the table-wide one); None without classes,
        or when it is infinite (a class no threshold admits; JSON, and so every stored report,
        has no infinity)."""
        if len(data) == 0:
            return None
        figures = self.measure(data)
        value = float(figures.min() if self.worst == "min" else figures.max())
        return value if np.isfinite(value) else None

    def check(self, data: ClassData) -> ModelCheck:
        """The model on a whole table: what the release report and the policy show."""
        ok = self.passes(data) if self.per_class else np.ones(len(data), dtype=bool)
        return ModelCheck(
            model=self.to_dict(),
            description=self.describe(),
            satisfied=self.satisfied(data),
            value=self.table_value(data),
            failing_classes=int((~ok).sum()),
            failing_records=int(data.sizes[~ok].sum()),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form :func:`anonweb.core.models.model_from_dict` reads back."""
        return {"model": self.kind, **{f: getattr(self, f) for f in self.fields}}

    def policy_message(self, check: ModelCheck, *, quasi_identifiers: Sequence[str]) -> str:
        """The release gate's sentence for a release failing this model as a policy threshold."""
        worst = f"{check.value:.4g}" if check.value is not None else "∞"
        return (
            f"After the plan, {check.failing_records} record(s) in {check.failing_classes} "
            f"class(es) on {', '.join(quasi_identifiers)} fail {self.describe()} "
            f"(the table's figure: {worst})."
        )

    def policy_facts(self, check: ModelCheck) -> dict[str, Any]:
        """Figures (never cell values) for the gate's finding."""
        return {"model": self.to_dict(), "value": check.value, "classes": check.failing_classes}


def require_int(value: object, what: str, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; booleans and floats are refused, not rounded."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ParameterError(f"{what} must be {wanted}, got {value!r}")
    return int(value)


def require_number(value: object, what: str) -> float:
    """``value`` as a finite float; booleans and text are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not np.isfinite(number):
        raise ParameterError(f"{what} must be a finite number, got {value!r}")
    return number


def require_column(value: object, what: str = "the sensitive column") -> str:
    if not isinstance(value, str) or not value:
        raise ParameterError(f"{what} must be a column name, got {value!r}")
    return value
