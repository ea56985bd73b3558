"""Membership and role changes, from any path, are audit events naming who made them."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from anonweb.accounts.models import Membership, Role
from anonweb.accounts.services import (
    MembershipError,
    membership_grant,
    membership_revoke,
    membership_set_role,
)
from anonweb.audit.models import AuditEvent
from anonweb.audit.selectors import audit_verify_chain
from tests.web.factories import UserFactory

pytestmark = pytest.mark.django_db


def _membership_events():
    return list(AuditEvent.objects.filter(action__startswith="membership.").order_by("seq"))


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser(username="root", password="x" * 20)


def test_the_service_audits_grants_role_changes_and_revocations(team, officer):
    user = UserFactory(username="newbie")
    before = len(_membership_events())
    membership = membership_grant(actor=officer, team=team, user=user, role=Role.ANALYST)
    membership_set_role(actor=officer, membership=membership, role=Role.DATA_STEWARD)
    membership_revoke(actor=officer, membership=membership)
    events = _membership_events()[before:]
    assert [e.action for e in events] == [
        "membership.granted",
        "membership.role_changed",
        "membership.revoked",
    ]
    assert all(e.actor_name == "olivia" and e.team_name == team.name for e in events)
    assert events[1].details["previous_role"] == Role.ANALYST
    assert events[1].details["role"] == Role.DATA_STEWARD
    assert not Membership.objects.filter(user=user).exists()
    with pytest.raises(MembershipError, match="unknown role"):
        membership_grant(actor=officer, team=team, user=user, role="owner")


def test_granting_privacy_officer_through_the_admin_is_audited(client, team, admin_user):
    analyst = UserFactory(username="ana2")
    membership = membership_grant(actor=None, team=team, user=analyst, role=Role.ANALYST)
    client.force_login(admin_user)
    url = reverse("admin:accounts_membership_change", args=[membership.pk])
    response = client.post(url, {"team": team.pk, "user": analyst.pk, "role": Role.PRIVACY_OFFICER})
    assert response.status_code == 302, response.content[:2000]
    event = _membership_events()[-1]
    assert event.action == "membership.role_changed" and event.actor_name == "root"
    assert event.details["role"] == Role.PRIVACY_OFFICER
    assert event.details["previous_role"] == Role.ANALYST
    assert event.details["via"] == "admin"

    add = client.post(
        reverse("admin:accounts_membership_add"),
        {"team": team.pk, "user": analyst.pk, "role": Role.DATA_STEWARD},
    )
    assert add.status_code == 302
    assert _membership_events()[-1].action == "membership.granted"

    delete = client.post(
        reverse("admin:accounts_membership_delete", args=[membership.pk]), {"post": "yes"}
    )
    assert delete.status_code == 302
    last = _membership_events()[-1]
    assert last.action == "membership.revoked" and last.actor_name == "root"
    assert audit_verify_chain().ok


def test_the_team_page_inline_is_audited(client, team, admin_user):
    user = UserFactory(username="inline")
    client.force_login(admin_user)
    prefix = "memberships"
    data = {
        "name": team.name,
        "slug": team.slug,
        f"{prefix}-TOTAL_FORMS": "1",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
        f"{prefix}-0-user": user.pk,
        f"{prefix}-0-role": Role.PRIVACY_OFFICER,
        f"{prefix}-0-team": team.pk,
    }
    response = client.post(reverse("admin:accounts_team_change", args=[team.pk]), data)
    assert response.status_code == 302, response.content[:3000]
    event = _membership_events()[-1]
    assert event.action == "membership.granted" and event.actor_name == "root"
    assert event.details["username"] == "inline" and event.details["via"] == "admin"


def test_a_direct_change_and_a_deleted_user_are_audited_too(team):
    user = UserFactory(username="shelly")
    membership = Membership.objects.create(team=team, user=user, role=Role.ANALYST)
    membership.role = Role.PRIVACY_OFFICER
    membership.save()
    user.delete()
    events = _membership_events()[-3:]
    assert [e.action for e in events] == [
        "membership.granted",
        "membership.role_changed",
        "membership.revoked",
    ]
    assert all(e.details["via"] == "direct" and e.actor_name == "system" for e in events)
    assert events[2].details["username"] == "shelly"
    assert audit_verify_chain().ok


def test_bootstrap_demo_grants_through_the_service(monkeypatch, settings, tmp_path):
    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    for name in ("OFFICER", "STEWARD", "ANALYST", "ADMIN"):
        monkeypatch.delenv(f"ANONWEB_DEMO_PASSWORD_{name}", raising=False)
    call_command("bootstrap_demo", "--no-dataset", stdout=__import__("io").StringIO())
    events = _membership_events()
    assert sorted(e.details["username"] for e in events) == ["analyst", "officer", "steward"]
    assert {e.details["via"] for e in events} == {"bootstrap_demo"}


@pytest.mark.parametrize("password", ["123456789012", "password", "officer1", "short"])
def test_a_chosen_demo_password_must_pass_the_validators(monkeypatch, password):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    monkeypatch.setenv("ANONWEB_DEMO_PASSWORD_OFFICER", password)
    with pytest.raises(CommandError, match="ANONWEB_DEMO_PASSWORD_OFFICER is refused"):
        call_command("bootstrap_demo", "--no-dataset", stdout=__import__("io").StringIO())
    assert not get_user_model().objects.filter(username="officer").exists()
