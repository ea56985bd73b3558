"""Teams and per-team roles. Users are Django's own; a user may belong to several teams."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, cast

from django.conf import settings
from django.db import models

from anonweb.accounts.roles_version import roles_changed


class Role(models.TextChoices):
    PRIVACY_OFFICER = "privacy_officer", "Privacy officer"
    DATA_STEWARD = "data_steward", "Data steward"
    ANALYST = "analyst", "Analyst"


class Team(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=120, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MembershipQuerySet(models.QuerySet["Membership"]):
    """Writes that bypass a membership's save and delete (and so the signals) change the
    version of the roles kept across requests too (:mod:`anonweb.accounts.roles_version`)."""

    def update(self, **kwargs: Any) -> int:
        count = super().update(**kwargs)
        roles_changed()
        return count

    def delete(self) -> tuple[int, dict[str, int]]:
        deleted = super().delete()
        roles_changed()
        return deleted

    def _raw_delete(self, using: Any) -> int:
        deleted = super()._raw_delete(using)
        roles_changed()
        return int(deleted)

    def bulk_create(self, *args: Any, **kwargs: Any) -> list[Membership]:  # type: ignore[override]  # passed through as given
        made = cast(list[Membership], super().bulk_create(*args, **kwargs))
        roles_changed()
        return made

    def bulk_update(self, *args: Any, **kwargs: Any) -> int:
        count = super().bulk_update(*args, **kwargs)
        roles_changed()
        return count


class Membership(models.Model):
    # Not fields: set on an instance by the services (which audit the change themselves) and by
    # the pre_save signal (the role before a direct save), read back by the signals.
    _audited: bool
    _previous_role: str | None

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=32, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user", "role"], name="unique_team_user_role")
        ]
        ordering = ["team__name", "user__username", "role"]

    def __str__(self) -> str:
        return f"{self.user} — {self.get_role_display()} in {self.team}"


class TeamGroup(models.Model):
    """A named group of a team's members (e.g. "qa"), which a release names as its recipients
    (``"group:qa"``). Scoped to its team: two teams may each have a group of the same name.
    Members change through ``anonweb.accounts.services`` (audited); a member receives a release
    only while they are an analyst of the team."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=120)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="team_groups"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_group_name_per_team")
        ]
        ordering = ["team__name", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.team})"


class ApiToken(models.Model):
    """An API key, stored as its SHA-256 only: the key itself is shown once, when it is made,
    and never kept. A key is 160 random bits, so a plain digest is as hard to reverse as the
    key is to guess."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"API token of {self.user} ({self.digest[:8]}…)"

    @staticmethod
    def digest_of(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8")).hexdigest()

    @classmethod
    def issue(cls, user) -> tuple[ApiToken, str]:
        """A new token of ``user`` and its key (the only time the key exists)."""
        key = secrets.token_hex(20)
        return cls.objects.create(user=user, digest=cls.digest_of(key)), key
