"""Errors raised by the computation core.

Every error is a ``ValueError`` whose message is written for a privacy officer: it names the
column, value or parameter at fault. Interfaces (CLI, views, jobs) show the message as it is.
"""


class CoreError(ValueError):
    """Base class: bad input to the core."""


class DataError(CoreError):
    """A table cannot be read or does not have what was asked of it."""


class HierarchyError(CoreError):
    """A generalization hierarchy is malformed or does not fit its column."""


class ParameterError(CoreError):
    """A parameter is out of range or inconsistent with the others."""


class PlanError(ParameterError):
    """A plan refused before it runs; ``errors`` lists every problem found, one sentence each
    (the message joins them with "; ")."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors) or ["the plan was refused"]
        super().__init__("; ".join(self.errors))
