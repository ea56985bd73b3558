"""Account changes made in the admin are audit events naming the administrator: superuser and
staff status, model permissions and groups, a password set, a user added, a team renamed. The
same changes from a shell are recorded with actor ``system``. No event holds a password or its
hash."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.forms import MultiWidget
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.audit.selectors import audit_verify_chain
from tests.web.factories import PASSWORD, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "another horse battery staple 42"


@pytest.fixture
def admin_client(client):
    root = User.objects.create_superuser("root", "root@example.org", PASSWORD)
    client.force_login(root)
    return client


def _form_data(response) -> dict:
    """The admin form's data as the browser would post it unchanged."""
    form = response.context["adminform"].form
    data: dict = {}
    for name, field in form.fields.items():
        if field.disabled:
            continue
        value = form[name].value()
        if isinstance(field.widget, MultiWidget):
            for i, part in enumerate(field.widget.decompress(value)):
                data[f"{name}_{i}"] = "" if part is None else str(part)
        elif isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, (list, tuple)):
            data[name] = [str(v) for v in value]
        else:
            data[name] = "" if value is None else str(value)
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = str(management[name].value() or 0)
    return data


def _change(admin_client, obj, **changes):
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    data = {**_form_data(admin_client.get(url)), **changes}
    data = {k: v for k, v in data.items() if v is not None}
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    return response


def _event(action, actor="root") -> AuditEvent:
    events = list(AuditEvent.objects.filter(action=action, actor_name=actor))
    assert len(events) == 1, [e.action for e in AuditEvent.objects.all()]
    return events[0]


@pytest.mark.parametrize("flag", ["is_superuser", "is_staff"])
def test_granting_superuser_or_staff_status_names_the_administrator(admin_client, flag):
    user = UserFactory(username="ana")
    _change(admin_client, user, **{flag: "on"})
    event = _event("user.status_changed")
    assert event.actor_name == "root" and event.target_id == str(user.pk)
    assert event.details == {"username": "ana", "changed": {flag: [False, True]}, "via": "admin"}
    _change(admin_client, User.objects.get(pk=user.pk), **{flag: None})
    revoked = AuditEvent.objects.filter(action="user.status_changed").order_by("seq").last()
    assert revoked.details["changed"] == {flag: [True, False]}


def test_granting_a_model_permission_and_a_group_is_audited(admin_client):
    user = UserFactory(username="ana")
    group = Group.objects.create(name="reviewers")
    permission = Permission.objects.get(codename="view_dataset")
    _change(admin_client, user, user_permissions=[str(permission.pk)], groups=[str(group.pk)])
    granted = _event("user.permissions_granted")
    assert granted.actor_name == "root"
    assert granted.details == {
        "user": "ana",
        "permissions": ["datasets.view_dataset"],
        "via": "admin",
    }
    assert _event("user.groups_granted").details["groups"] == ["reviewers"]
    _change(admin_client, group, permissions=[str(permission.pk)])
    assert _event("group.permissions_granted").details == {
        "group": "reviewers",
        "permissions": ["datasets.view_dataset"],
        "via": "admin",
    }


def test_setting_a_password_is_audited_without_it(admin_client):
    user = UserFactory(username="ana")
    url = reverse("admin:auth_user_password_change", args=[user.pk])
    response = admin_client.post(url, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 302
    event = _event("user.credential_set")
    assert event.actor_name == "root" and event.details["username"] == "ana"
    user.refresh_from_db()
    assert NEW_PASSWORD not in event.details_text and user.password not in event.details_text


def test_adding_a_user_is_audited(admin_client):
    response = admin_client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "newcomer",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
            "usable_password": "true",
        },
    )
    assert response.status_code == 302
    event = _event("user.created")
    assert event.actor_name == "root"
    assert event.details == {
        "username": "newcomer",
        "is_superuser": False,
        "is_staff": False,
        "is_active": True,
        "via": "admin",
    }
    assert NEW_PASSWORD not in event.details_text


def test_renaming_a_team_is_audited(admin_client):
    team = TeamFactory(name="Clinic", slug="clinic")
    _change(admin_client, team, name="Clinic North")
    event = _event("team.renamed")
    assert event.actor_name == "root" and event.team_name == "Clinic North"
    assert event.details == {"previous_name": "Clinic", "name": "Clinic North", "via": "admin"}


def test_the_same_changes_from_a_shell_are_audited_as_direct(db):
    user = UserFactory(username="ana")
    user.is_superuser = True
    user.save()
    event = _event("user.status_changed", actor="system")
    assert event.actor_name == "system" and event.details["via"] == "direct"


def test_a_login_records_no_account_change(client):
    UserFactory(username="ana")
    before = AuditEvent.objects.count()
    response = client.post(reverse("login"), {"username": "ana", "password": PASSWORD})
    assert response.status_code == 302 and User.objects.get(username="ana").last_login
    assert AuditEvent.objects.count() == before
    assert audit_verify_chain().ok
