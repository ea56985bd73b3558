"""Reads scoped to who asks: privacy officers and data stewards of the dataset's team."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from django.http import Http404

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import may_see_raw_values, team_ids_where
from anonweb.common.charts import INTERNAL, PUBLISHED
from anonweb.core.errors import ParameterError
from anonweb.core.raw_values import Failure, public_result
from anonweb.datasets.models import Dataset, Hierarchy

if TYPE_CHECKING:
    from django.contrib.auth.models import User

STAFF_ROLES = (Role.PRIVACY_OFFICER, Role.DATA_STEWARD)


def datasets_for_user(*, user: User) -> QuerySet[Dataset]:
    teams = team_ids_where(user=user, roles=STAFF_ROLES)
    return Dataset.objects.filter(team__in=teams).select_related("team", "uploaded_by")


def dataset_get_for_user(*, user: User, dataset_id: int) -> Dataset:
    try:
        return datasets_for_user(user=user).get(pk=dataset_id)
    except (Dataset.DoesNotExist, ValueError, TypeError):
        raise Http404("No such dataset.") from None


def can_see_raw(*, user: User, dataset: Dataset) -> bool:
    """Raw rows are for the team's privacy officers only."""
    return may_see_raw_values(user=user, team=dataset.team)


def dataset_error_for(*, dataset: Dataset, officer_teams: frozenset[int]) -> str:
    """Why the upload could not be read, for a reader who is a privacy officer of
    ``officer_teams`` (:func:`~anonweb.accounts.selectors.raw_value_teams`): the reason as the
    reader wrote it (it may quote the file's cells) for the team's officers, a sentence with no
    data in it for everyone else."""
    if not dataset.error or dataset.team_id in officer_teams:
        return dataset.error
    return Failure(kind="unreadable").summary


def risk_for_user(*, user: User, dataset: Dataset, risk: dict[str, Any]) -> dict[str, Any]:
    """A risk profile of ``dataset`` as ``user`` may read it: whole for the team's privacy
    officers, its public part (no record or value of the source) for everyone else."""
    internal = can_see_raw(user=user, dataset=dataset)
    return risk_for_view(risk=risk, view=INTERNAL if internal else PUBLISHED)


def risk_for_view(*, risk: dict[str, Any], view: str) -> dict[str, Any]:
    """A risk profile as a reader of ``view`` may read it (:func:`risk_for_user` says who reads
    which): whole in the internal view, its public part in the published one."""
    if view == INTERNAL:
        return risk
    if view != PUBLISHED:
        raise ValueError(f"unknown view {view!r}")
    public: dict[str, Any] = public_result(risk)
    return public


def hierarchies_for(*, dataset: Dataset) -> dict[str, Hierarchy]:
    """The current hierarchy of each column that has one, without their tables (a summary:
    ``column``, ``kind``, ``levels``, ``values``, ``sha256``, ``created_at``)."""
    rows = (
        Hierarchy.objects.filter(dataset=dataset, is_current=True).defer("spec").order_by("column")
    )
    return {h.column: h for h in rows}


def hierarchy_spec(*, dataset: Dataset, column: str, sha256: str | None = None) -> dict | None:
    """One column's hierarchy in the plans' own form (``{"rows": ...}`` or a builder spec): the
    current one, or the version with digest ``sha256`` (a plan's reference); None if none."""
    rows = Hierarchy.objects.filter(dataset=dataset, column=column)
    rows = rows.filter(sha256=sha256) if sha256 else rows.filter(is_current=True)
    found = rows.values_list("spec", flat=True).first()
    return found


def plan_with_hierarchies(*, dataset: Dataset, plan: dict) -> dict:
    """The plan with each reference to an uploaded hierarchy (``{"uploaded": "<sha256>"}``)
    replaced by its rows, as the core runs it. Raises ParameterError for a reference the
    dataset does not hold."""

    specs = plan.get("hierarchies") or {}
    if not isinstance(specs, dict):
        return plan
    resolved = {}
    for column, spec in specs.items():
        if isinstance(spec, dict) and "uploaded" in spec:
            digest = spec["uploaded"]
            found = (
                hierarchy_spec(dataset=dataset, column=column, sha256=digest)
                if isinstance(digest, str) and digest
                else None
            )
            if found is None:
                raise ParameterError(
                    f"hierarchy for {column!r}: this dataset holds no uploaded hierarchy "
                    f"{str(digest)[:12]!r} for that column; open the plan page again to use the "
                    "current one"
                )
            spec = found
        resolved[column] = spec
    return {**plan, "hierarchies": resolved}
