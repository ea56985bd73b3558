"""Audit for what does not go through the services: direct membership saves and deletions
(a shell, a cascade when a user or a team is deleted) and login failures and lockouts."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from anonweb.accounts.lockout import lockout_seconds
from anonweb.accounts.models import Membership
from anonweb.accounts.roles_version import roles_changed
from anonweb.accounts.services import audit_membership
from anonweb.accounts.user_cache import users_changed
from anonweb.audit.services import audit_record
from anonweb.common.security import client_address

USERNAME_LIMIT = 150


@receiver(pre_save, sender=Membership)
def _remember_role(sender, instance: Membership, raw=False, **kwargs):
    if raw or getattr(instance, "_audited", False) or instance.pk is None:
        return
    instance._previous_role = (
        Membership.objects.filter(pk=instance.pk).values_list("role", flat=True).first()
    )


@receiver(post_save, sender=Membership)
def _audit_direct_save(sender, instance: Membership, created: bool, raw=False, **kwargs):
    if raw or getattr(instance, "_audited", False):
        return
    previous = getattr(instance, "_previous_role", None)
    if created:
        audit_membership(actor=None, membership=instance, action="membership.granted", via="direct")
    elif previous != instance.role:
        audit_membership(
            actor=None,
            membership=instance,
            action="membership.role_changed",
            via="direct",
            previous_role=previous,
        )


@receiver(post_save, sender=Membership)
@receiver(post_delete, sender=Membership)
def _forget_roles(sender, **kwargs):
    # Every save or deletion, through the services or not: the rest of the request reads the
    # roles as they are now, and so does every later request (the roles kept across requests
    # are read under the version this changes).
    roles_changed()


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
@receiver(post_delete, sender=settings.AUTH_USER_MODEL)
def _forget_users(sender, **kwargs):
    # Every save or deletion of a user (a password, a deactivation, a login's time): the users
    # kept across requests are read under the version this changes.
    users_changed()


@receiver(post_delete, sender=Membership)
def _audit_direct_delete(sender, instance: Membership, **kwargs):
    if getattr(instance, "_audited", False):
        return
    audit_membership(actor=None, membership=instance, action="membership.revoked", via="direct")


def _address(request) -> str:
    return getattr(request, "axes_ip_address", None) or client_address(request)


def _username(credentials: dict) -> str:
    name = credentials.get(settings.AXES_USERNAME_FORM_FIELD) or credentials.get("username") or ""
    return str(name)[:USERNAME_LIMIT]


@receiver(user_login_failed)
def _audit_login_failed(sender, credentials: dict, request=None, **kwargs):
    """Every failed login is an event (the password is never part of it)."""
    if request is None:
        return
    audit_record(
        actor=None,
        action="auth.login_failed",
        details={
            "username": _username(credentials),
            "address": _address(request),
            "locked_out": bool(getattr(request, "axes_locked_out", False)),
        },
    )


def _audit_locked_out(sender, request=None, username=None, ip_address=None, **kwargs):
    """One event per lockout: when the failures reach the limit. django-axes sends the signal
    again for every refused try while the lock holds (each restarts the cool-off); those are
    recorded as failed logins with ``locked_out``, not as new lockouts. Deciding from axes'
    own count, kept in the database, holds across worker processes, which share no cache."""
    failures = getattr(request, "axes_failures_since_start", None) if request else None
    if failures != settings.AXES_FAILURE_LIMIT:
        return
    username = str(username or "")[:USERNAME_LIMIT]
    address = ip_address or (_address(request) if request is not None else "")
    audit_record(
        actor=None,
        action="auth.locked_out",
        details={
            "username": username,
            "address": address,
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "cooloff_seconds": lockout_seconds(request),
        },
    )


def connect_lockout_signal() -> None:
    from axes.signals import user_locked_out

    user_locked_out.connect(_audit_locked_out, dispatch_uid="anonweb-audit-lockout")
