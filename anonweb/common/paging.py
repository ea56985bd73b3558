"""One page of a list page's objects: every HTML list (datasets, jobs, releases, the audit
trail) shows ``PAGE_SIZE`` objects at a time through ``page_of`` and the ``_pager.html``
include, whose links keep the page's filters."""

from __future__ import annotations

from typing import TypeVar

from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest

PAGE_SIZE = 50

M = TypeVar("M", bound=Model)


def page_of(request: HttpRequest, items: QuerySet[M], per_page: int = PAGE_SIZE) -> Page[M]:
    """The page ``?page=`` asks for; the first if it is not a number, the last if it is past
    the end. ``items`` must be in a total order (ending with the primary key) so that pages
    neither repeat nor skip an object. Costs two queries (a count and the page) however many
    objects there are."""
    if not items.ordered:
        raise ValueError("page_of needs an ordered queryset")
    return Paginator(items, per_page).get_page(request.GET.get("page"))
