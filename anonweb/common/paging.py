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
    objects there are; the first page of a list that fits on it, one (its rows, read with one
    past the page, are the count: a COUNT of a list's conditions cost Django as much to build
    as the page itself)."""
    if not items.ordered:
        raise ValueError("page_of needs an ordered queryset")
    asked = request.GET.get("page")
    paginator = Paginator(items, per_page)
    if asked not in (None, "", "1"):
        return paginator.get_page(asked)
    rows = list(items[: per_page + 1])
    if len(rows) <= per_page:
        paginator.count = len(rows)  # the cached property, known here
    return Page(rows[:per_page], 1, paginator)
