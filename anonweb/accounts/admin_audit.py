"""Audit of account changes made outside the services: in the admin or a shell.

Granting or removing superuser, staff or active status, a model permission or a group, setting
a password, adding a user and renaming a team are each an event. The admin names the
administrator as the actor (it sets :data:`acting_admin` around its views); a change from a
shell is recorded with actor ``system`` and ``"via": "direct"``. Events hold names and flags,
never a password or its hash."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.db.models.signals import m2m_changed, post_save, pre_save
from django.dispatch import receiver

from anonweb.accounts.models import Team
from anonweb.audit.services import audit_record

acting_admin: ContextVar[Any] = ContextVar("acting_admin", default=None)
FLAGS = ("is_superuser", "is_staff", "is_active")


@contextmanager
def admin_acting(user: Any) -> Iterator[None]:
    """Name ``user`` as the actor of the account changes made inside the block."""
    token = acting_admin.set(user)
    try:
        yield
    finally:
        acting_admin.reset(token)


def _record(action: str, *, target: Any, details: dict[str, Any], team: Team | None = None):
    actor = acting_admin.get()
    audit_record(
        actor=actor,
        team=team,
        action=action,
        target=target,
        details={**details, "via": "admin" if actor is not None else "direct"},
    )


@receiver(pre_save, sender=User)
def _remember_user(sender, instance: User, raw=False, update_fields=None, **kwargs):
    if raw or instance.pk is None:
        return
    if update_fields is not None and not set(update_fields) & {*FLAGS, "password"}:
        return  # a login's last_login: nothing audited changes
    instance._audit_before = (  # type: ignore[attr-defined]
        User.objects.filter(pk=instance.pk).values(*FLAGS, "password").first()
    )


@receiver(post_save, sender=User)
def _audit_user(sender, instance: User, created: bool, raw=False, update_fields=None, **kwargs):
    if raw:
        return
    if created:
        _record(
            "user.created",
            target=instance,
            details={"username": instance.username, **{f: getattr(instance, f) for f in FLAGS}},
        )
        return
    before = getattr(instance, "_audit_before", None)
    instance._audit_before = None  # type: ignore[attr-defined]
    if not before:
        return
    changed = {
        f: [before[f], getattr(instance, f)] for f in FLAGS if before[f] != getattr(instance, f)
    }
    if changed:
        _record(
            "user.status_changed",
            target=instance,
            details={"username": instance.username, "changed": changed},
        )
    # A hash upgraded at login is saved with update_fields=["password"]: the same password.
    rehash = update_fields is not None and set(update_fields) == {"password"}
    if before["password"] != instance.password and not rehash:
        _record(
            "user.credential_set",
            target=instance,
            details={"username": instance.username, "usable": instance.has_usable_password()},
        )


def _names(model: type, pks: Any) -> list[str]:
    if model is Permission:
        rows = Permission.objects.filter(pk__in=pks).select_related("content_type")
        return sorted(f"{p.content_type.app_label}.{p.codename}" for p in rows)
    if model is Group:
        return sorted(Group.objects.filter(pk__in=pks).values_list("name", flat=True))
    return sorted(User.objects.filter(pk__in=pks).values_list("username", flat=True))


def _m2m(instance: Any, action: str, model: type, pk_set: Any, what: str) -> None:
    if action == "pre_clear":
        relation = (
            instance.user_permissions
            if what == "permissions" and isinstance(instance, User)
            else instance.permissions
            if what == "permissions"
            else instance.groups
        )
        instance._audit_cleared = list(relation.values_list("pk", flat=True))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    pks = getattr(instance, "_audit_cleared", []) if action == "post_clear" else pk_set
    if not pks:
        return
    kind = "user" if isinstance(instance, User) else "group"
    name = instance.username if isinstance(instance, User) else instance.name
    verb = "granted" if action == "post_add" else "revoked"
    _record(
        f"{kind}.{what}_{verb}",
        target=instance,
        details={kind: name, what: _names(model, pks)},
    )


@receiver(m2m_changed, sender=User.user_permissions.through)
def _audit_user_permissions(sender, instance, action, reverse, model, pk_set, **kwargs):
    if not reverse:
        _m2m(instance, action, model, pk_set, "permissions")


@receiver(m2m_changed, sender=User.groups.through)
def _audit_user_groups(sender, instance, action, reverse, model, pk_set, **kwargs):
    if not reverse:
        _m2m(instance, action, model, pk_set, "groups")


@receiver(m2m_changed, sender=Group.permissions.through)
def _audit_group_permissions(sender, instance, action, reverse, model, pk_set, **kwargs):
    if not reverse:
        _m2m(instance, action, model, pk_set, "permissions")


@receiver(pre_save, sender=Team)
def _remember_team(sender, instance: Team, raw=False, **kwargs):
    if raw or instance.pk is None:
        return
    instance._audit_name = (  # type: ignore[attr-defined]
        Team.objects.filter(pk=instance.pk).values_list("name", flat=True).first()
    )


@receiver(post_save, sender=Team)
def _audit_team(sender, instance: Team, created: bool, raw=False, **kwargs):
    if raw or created:
        return
    previous = getattr(instance, "_audit_name", None)
    if previous is not None and previous != instance.name:
        _record(
            "team.renamed",
            target=instance,
            team=instance,
            details={"previous_name": previous, "name": instance.name},
        )
