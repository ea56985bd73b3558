"""Reads scoped to who asks: privacy officers and data stewards of the dataset's team."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from anonweb.accounts.models import Membership, Role
from anonweb.datasets.models import Dataset

STAFF_ROLES = (Role.PRIVACY_OFFICER, Role.DATA_STEWARD)


def datasets_for_user(*, user) -> QuerySet[Dataset]:
    teams = Membership.objects.filter(user=user, role__in=STAFF_ROLES).values("team")
    return Dataset.objects.filter(team__in=teams).select_related("team", "uploaded_by")


def dataset_get_for_user(*, user, dataset_id: int) -> Dataset:
    try:
        return datasets_for_user(user=user).get(pk=dataset_id)
    except (Dataset.DoesNotExist, ValueError, TypeError):
        raise Http404("No such dataset.") from None


def can_see_raw(*, user, dataset: Dataset) -> bool:
    """Raw rows are for the team's privacy officers only."""
    return Membership.objects.filter(
        user=user, team=dataset.team, role=Role.PRIVACY_OFFICER
    ).exists()
