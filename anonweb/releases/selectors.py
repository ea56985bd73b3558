from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import roles_by_team, team_ids_where
from anonweb.common.charts import INTERNAL, VIEWS, view_kind
from anonweb.core.errors import CoreError
from anonweb.core.release.report import (
    attacks_without_records,
    override_for_reader,
    private_finding_detail,
)
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.releases.attacks import release_attacks_get
from anonweb.releases.conflicts import FINDINGS_FILE
from anonweb.releases.gate import GateNow, release_gate_now
from anonweb.releases.models import ConflictFinding, Release, ReleaseStatus
from anonweb.releases.storage import read_private_json
from anonweb.releases.utility import (
    UtilityPage,
    release_utility_page,
    release_utility_read,
    utility_waits_for_job,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


# A release's JSON documents: a list shows none of them, and each can be large (a search's
# report holds its alternatives), so a list reads its rows without them.
DOCUMENTS = ("plan", "report", "published_report", "gate", "override", "conflicts_checked")


# The rows a release is read with: its team, its dataset and the people named on it.
JOINED = ("team", "dataset", "requested_by", "reviewed_by")


def releases_for_user(
    *,
    user: User,
    dataset_id: int | None = None,
    status: ReleaseStatus | None = None,
    documents: bool = True,
) -> QuerySet[Release]:
    """Officers and stewards see all their teams' releases; analysts only approved ones that
    they receive: those naming no recipients (every analyst of the team), those naming them,
    and those naming a group of the team they are in. Newest first; optionally only those of
    one dataset, or in one state; ``documents`` False leaves out the JSON documents (a list
    that shows none of them, and of the rows it joins only their names). Every page, list,
    download and API answer reads this."""
    staff_teams = team_ids_where(user=user, roles=STAFF_ROLES)
    # a team where the user is also staff already shows every release: no analyst condition
    analyst_teams = [
        t for t in team_ids_where(user=user, roles=(Role.ANALYST,)) if t not in staff_teams
    ]
    visible = Q(team__in=staff_teams)
    if analyst_teams:
        received = Release.objects.filter(
            Q(recipients=[]) | Q(recipient_users=user) | Q(recipient_groups__members=user)
        ).values("pk")
        visible |= Q(team__in=analyst_teams, status=ReleaseStatus.APPROVED, pk__in=received)
    releases = Release.objects.filter(visible)
    if dataset_id is not None:
        releases = releases.filter(dataset_id=dataset_id)
    if status is not None:
        releases = releases.filter(status=status)
    # Every condition is a subquery (IN), so a release is one row without DISTINCT, which
    # made PostgreSQL compare whole rows, their JSON reports included, on every page.
    releases = releases.select_related(*JOINED)
    if not documents:
        releases = releases.only(*_list_fields())
    return releases.order_by("-created_at", "-id")


# What a list of releases reads of the rows it joins: their names. Every column of the release
# but its documents is read, so a list never queries a row again for one of them.
JOINED_NAMES = (
    "team__name",
    "team__slug",
    "dataset__name",
    "dataset__team",
    "requested_by__username",
    "reviewed_by__username",
)


def _list_fields() -> tuple[str, ...]:
    own = tuple(f.name for f in Release._meta.concrete_fields if f.name not in DOCUMENTS)
    return own + JOINED_NAMES


def release_datasets_for_user(*, user: User) -> list[tuple[int, str, str]]:
    """``(dataset id, dataset name, team name)`` of each dataset with a release the user may
    see, by name: the choices of the release list's dataset filter."""
    return list(
        releases_for_user(user=user)
        .order_by("dataset__name", "team__name", "dataset_id")
        .values_list("dataset_id", "dataset__name", "team__name")
        .distinct()
    )


def release_get_for_user(*, user: User, release_id: int, documents: bool = True) -> Release:
    """One release the user may see (:func:`releases_for_user`'s rule), else 404; without its
    JSON documents if ``documents`` is False (a download reads none of them). Read by its key
    alone and then checked by :func:`release_visible_to`: the list's query, with its
    conditions on teams, status and recipients, cost Django three times a plain read to build
    on every release page and download."""
    rows = Release.objects.select_related(*JOINED)
    if not documents:
        rows = rows.only(*_list_fields())
    try:
        release = rows.get(pk=release_id)
    except (Release.DoesNotExist, ValueError, TypeError):
        raise Http404("No such release.") from None
    if not release_visible_to(user=user, release=release):
        raise Http404("No such release.")
    return release


def release_visible_to(*, user: User, release: Release) -> bool:
    """Whether :func:`releases_for_user` lists ``release`` for ``user``
    (:func:`releases_visible_among` for one release)."""
    return bool(releases_visible_among(user=user, releases=[release]))


def releases_visible_among(*, user: User, releases: Sequence[Release]) -> list[Release]:
    """Those of ``releases`` that :func:`releases_for_user` lists for ``user``, in their order,
    decided on rows already read: their team's officers and stewards see them; their team's
    analysts only approved ones that name no recipients, name them, or name a group of the team
    they are in (at most two small queries, and only for releases that name recipients). A
    test holds the two to the same answer for every kind of reader and release."""
    roles = roles_by_team(user=user)
    staff = {t for t, held in roles.items() if held & set(STAFF_ROLES)}
    analyst = {t for t, held in roles.items() if Role.ANALYST in held} - staff

    def approved_for_analyst(r: Release) -> bool:
        return r.team_id in analyst and r.status == ReleaseStatus.APPROVED

    named = [r.pk for r in releases if approved_for_analyst(r) and r.recipients != []]
    received: set[int] = set()
    if named:
        received.update(
            Release.recipient_users.through.objects.filter(
                release_id__in=named, user_id=user.pk
            ).values_list("release_id", flat=True)
        )
        received.update(
            Release.recipient_groups.through.objects.filter(
                release_id__in=named, teamgroup__members=user
            ).values_list("release_id", flat=True)
        )
    return [
        r
        for r in releases
        if r.team_id in staff
        or (approved_for_analyst(r) and (r.recipients == [] or r.pk in received))
    ]


def release_get_downloadable(*, user: User, release_id: int, documents: bool = True) -> Release:
    """A release the user may download (page and API): analysts an approved one, the team's
    officers and stewards any that is not rejected. Hidden ones are 404, rejected ones 403.
    ``documents`` as for :func:`release_get_for_user`."""
    release = release_get_for_user(user=user, release_id=release_id, documents=documents)
    if release.status != ReleaseStatus.APPROVED and not release_is_staff(
        user=user, release=release
    ):
        raise Http404("No such release.")
    if release.status == ReleaseStatus.REJECTED:
        raise PermissionDenied("A rejected release cannot be downloaded.")
    return release


def release_get_for_signoff(*, user: User, release_id: int) -> Release:
    """A release whose sign-off report the user may read: the team's officers and stewards
    only, since it carries the internal report. Analysts get 403 for a release they can see
    (approved) and 404 for one they cannot; other teams 404."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not release_is_staff(user=user, release=release):
        raise PermissionDenied(
            "The sign-off report carries internal figures: privacy officers and data stewards "
            "of the team only."
        )
    return release


def release_gate_for_user(*, user: User, release_id: int) -> tuple[Release, GateNow]:
    """A release and its gate as it stands now, for its team's officers and stewards (analysts:
    403 for a release they can see, 404 otherwise; other teams 404)."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not release_is_staff(user=user, release=release):
        raise PermissionDenied(
            "The release gate's findings are internal: privacy officers and data stewards of "
            "the team only."
        )
    return release, release_gate_now(release=release)


TYPE_LABELS = {
    "exact_inference": "Exact inference",
    "differencing": "Differencing",
    "intersection": "Intersection",
    "linkage": "Linkage",
    "undecided": "Not decided within the work budget",
}


@dataclass(frozen=True)
class ReaderRoles:
    """The teams where a person reads releases' internal reports (``staff``: a privacy officer
    or a data steward) and, of those, where they also read the records and values an attacker
    would infer (``officer``: a privacy officer)."""

    staff: frozenset[int]
    officer: frozenset[int]


def reader_roles(*, user: User) -> ReaderRoles:
    """The user's :class:`ReaderRoles`, in one query per request. Who reads what of a release is decided
    here and nowhere else."""
    roles = roles_by_team(user=user)
    return ReaderRoles(
        staff=frozenset(t for t, r in roles.items() if r & set(STAFF_ROLES)),
        officer=frozenset(t for t, r in roles.items() if Role.PRIVACY_OFFICER in r),
    )


def conflicts_for(*, release: Release, user: User) -> list[dict]:
    """Conflict findings involving this release, as :func:`conflicts_for_releases` gives them."""
    return conflicts_for_releases(releases=[release], user=user)[release.pk]


def conflicts_for_releases(
    *, releases: Sequence[Release], user: User, roles: ReaderRoles | None = None
) -> dict[int, list[dict]]:
    """Conflict findings involving each release, by release id, in a number of queries that does
    not grow with the releases: those its own check found against earlier releases, and those
    later releases' checks found with it. Every release named carries its live status; officers
    and stewards of the release's team only (analysts get none: nothing of other releases,
    pending or rejected ones included, nor of the source). Only a privacy officer of the team
    gets the records and the values an attacker would infer (from the finding release's
    private files)."""

    out: dict[int, list[dict]] = {r.pk: [] for r in releases}
    roles = roles or reader_roles(user=user)
    shown = {r.pk: r for r in releases if r.team_id in roles.staff}
    if not shown:
        return out
    # Most releases are in no finding: the link table's one narrow query says so, and the
    # findings' query (joined, prefetched: several times its cost to build) is not built.
    found = list(
        ConflictFinding.involved.through.objects.filter(release_id__in=list(shown)).values_list(
            "conflictfinding_id", flat=True
        )
    )
    if not found:
        return out
    findings = (
        ConflictFinding.objects.filter(pk__in=found)
        .select_related("release")
        .prefetch_related("involved__dataset")
        .order_by("release__version", "position", "pk")
    )
    private_files: dict[int, list] = {}
    for f in findings:
        involved = sorted(f.involved.all(), key=lambda r: (r.created_at, r.pk))
        for release in (shown[r.pk] for r in involved if r.pk in shown):
            entry = {
                "id": f.pk,
                "type": f.type,
                "type_label": TYPE_LABELS.get(f.type, f.type),
                "records": f.records,
                "columns": f.columns,
                "explanation": f.explanation,
                "facts": f.facts,
                "found_by": f.release,
                "releases": [
                    {
                        "release": r,
                        "label": f"release {r.version}"
                        + ("" if r.dataset_id == release.dataset_id else f" of {r.dataset.name}"),
                        "live": r.status != "rejected",
                    }
                    for r in involved
                ],
                "live": all(r.status != ReleaseStatus.REJECTED for r in involved),
                "l_by_release": sorted((f.facts.get("l_by_release") or {}).items()),
            }
            if release.team_id in roles.officer:
                if f.release_id not in private_files:
                    private_files[f.release_id] = (
                        read_private_json(f.release.storage_key, FINDINGS_FILE) or []
                    )
                rows = private_files[f.release_id]
                if f.position < len(rows):
                    entry["private"] = private_finding_detail(rows[f.position])
            out[release.pk].append(entry)
    return out


class ReleasesNotComparable(CoreError):
    """Two releases that a comparison cannot put side by side (different sources, or one)."""


def release_is_staff(*, user: User, release: Release) -> bool:
    """Whether the user reads the release's internal report (its team's officers and stewards)."""
    return release.team_id in reader_roles(user=user).staff


def release_pair_for_user(*, user: User, a_id: int, b_id: int) -> tuple[Release, Release, bool]:
    """Two versions of one source that the user may compare, and whether they read the internal
    reports. Each release is fetched as its page fetches it (outside the user's teams, or
    pending for an analyst: 404); an analyst compares only releases they can download (rejected:
    403). Releases of different sources are refused with a reason."""
    a = release_get_for_user(user=user, release_id=a_id)
    b = release_get_for_user(user=user, release_id=b_id)
    staff = release_is_staff(user=user, release=a) and release_is_staff(user=user, release=b)
    if not staff:
        a = release_get_downloadable(user=user, release_id=a.pk)
        b = release_get_downloadable(user=user, release_id=b.pk)
    if a.dataset_id != b.dataset_id:
        raise ReleasesNotComparable(
            f"{a.dataset.name} v{a.version} and {b.dataset.name} v{b.version} are releases of "
            "different sources: only versions of one source can be compared."
        )
    if a.pk == b.pk:
        raise ReleasesNotComparable("Choose two different versions of the source to compare.")
    return a, b, staff


def release_versions_for_user(*, user: User, release: Release) -> list[Release]:
    """The other versions of the release's source the user can see (for "compare with": their
    numbers, titles and states only: nothing joined, no other column, which made this list
    cost more than the release page's own row). The source's versions are read by its key and
    kept by :func:`releases_visible_among`: a source has few, and the list's conditions on
    teams and recipients cost Django more to build than reading them all."""
    versions = (
        Release.objects.filter(dataset_id=release.dataset_id)
        .exclude(pk=release.pk)
        .only("id", "version", "title", "status", "team_id", "recipients")
        .order_by("-version")
    )
    return releases_visible_among(user=user, releases=list(versions))


def report_for_view(*, release: Release, view: str) -> dict[str, Any]:
    """The report a reader of ``view`` reads: the internal one (may describe the source) for the
    team's officers and stewards, the published one (only the released data) for everyone
    else. The page, the API and the fragments built at publication all read it here."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: {', '.join(VIEWS)}")
    return (release.report if view == INTERNAL else release.published_report) or {}


@dataclass
class ReleaseForReader:
    """What one person may see of one release: the single answer to "internal or published"
    that the release page, the comparison and the API read. Officers and stewards of the
    release's team (``staff``) read the internal report, the gate, the conflicts, the attack
    figures and the utility; everyone else who may see the release reads the published report
    and the stored (public) plan only. The records and values an attacker would infer are for
    the team's privacy officers (``officer``) alone. What reads files or the source (the gate,
    the attacks, the utility) is read on first use."""

    release: Release
    user: User
    staff: bool
    officer: bool
    conflicts: list[dict] = field(default_factory=list)

    @property
    def report(self) -> dict[str, Any]:
        # Analysts read the published report only: what the released data shows, nothing of
        # the source.
        return report_for_view(release=self.release, view=self.report_name)

    @property
    def report_name(self) -> str:
        return view_kind(internal=self.staff)

    @property
    def plan(self) -> dict[str, Any]:
        """The plan stored with the release: its public copy
        (:func:`anonweb.core.release.report.public_plan`) whoever reads it."""
        return self.release.plan or {}

    @property
    def findings(self) -> list[dict]:
        """The gate's findings recorded when the release was written (staff only)."""
        return list(self.release.findings) if self.staff else []

    @property
    def recipient(self) -> str | None:
        return self.release.recipient if self.staff else None

    @property
    def recipients(self) -> list[str] | None:
        """Whom the release names ([] when every analyst of the team receives it; staff only)."""
        return list(self.release.recipients) if self.staff else None

    @property
    def override(self) -> dict | None:
        return override_for_reader(self.release.override, staff=self.staff)

    @property
    def conflicts_checked(self) -> Any:
        return self.release.conflicts_checked if self.staff else None

    @cached_property
    def gate(self) -> GateNow | None:
        """The gate as it stands now (staff only): what an approval would be decided on."""
        return release_gate_now(release=self.release) if self.staff else None

    @cached_property
    def attacks(self) -> dict[str, Any] | None:
        """The attack figures (staff only); which records the reconstruction determines, and
        their values, for privacy officers only."""
        if not self.staff:
            return None
        stored = release_attacks_get(release=self.release)
        if stored is None or self.officer:
            return stored
        return attacks_without_records(stored)

    @cached_property
    def utility(self) -> dict[str, Any] | None:
        """The utility measured against the source (staff only)."""
        if not self.staff:
            return None
        return release_utility_read(user=self.user, release=self.release)

    @cached_property
    def utility_pending(self) -> bool:
        """Whether the utility waits for a job to measure it (staff only)."""
        return self.staff and utility_waits_for_job(release=self.release)

    @cached_property
    def utility_page(self) -> UtilityPage:
        """The utility, its charts, their markup and its section as the page shows them (staff
        only), built
        when the release is published or on the first view, and kept (:func:`anonweb.releases.utility.release_utility_page`)."""
        if not self.staff:
            return None, None, "", ""
        return release_utility_page(user=self.user, release=self.release)


def release_views_for_user(
    *, user: User, releases: Sequence[Release], conflicts: bool = True
) -> list[ReleaseForReader]:
    """What ``user`` may see of each of ``releases`` (fetched through :func:`releases_for_user`),
    in a number of queries that does not grow with the releases; ``conflicts`` False leaves the
    conflict findings out (a page that does not show them)."""
    roles = reader_roles(user=user)
    found = (
        conflicts_for_releases(releases=releases, user=user, roles=roles)
        if conflicts
        else {r.pk: [] for r in releases}
    )
    return [
        ReleaseForReader(
            release=r,
            user=user,
            staff=r.team_id in roles.staff,
            officer=r.team_id in roles.officer,
            conflicts=found[r.pk],
        )
        for r in releases
    ]


def release_view_for_user(
    *, release: Release, user: User, conflicts: bool = True
) -> ReleaseForReader:
    """What ``user`` may see of ``release`` (fetched through :func:`release_get_for_user`)."""
    (view,) = release_views_for_user(user=user, releases=[release], conflicts=conflicts)
    return view


def release_attacks_for_user(
    *, user: User, release_id: int
) -> tuple[Release, dict[str, Any] | None]:
    """The release and its attack figures, for its team's officers and stewards (others: 404
    for a release they cannot see, 403 for one they can)."""
    release = release_get_for_user(user=user, release_id=release_id)
    view = release_view_for_user(release=release, user=user, conflicts=False)
    if not view.staff:
        raise PermissionDenied(
            "The attack figures are computed from the source: officers and stewards only."
        )
    return release, view.attacks


def release_utility_for_user(*, user: User, release_id: int) -> tuple[Release, dict | None]:
    """The release and its utility, for its team's officers and stewards (others: 404 for a
    release they cannot see, 403 for one they can). None when its files are gone."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not release_is_staff(user=user, release=release):
        raise PermissionDenied(
            "The utility is computed from the source: officers and stewards only."
        )
    return release, release_utility_read(user=user, release=release)
