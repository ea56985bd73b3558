"""API tokens are stored as the SHA-256 of their key: the key is shown once, when it is made,
and a copy of the database holds none that works. Tokens made before (plain keys in Django
REST framework's table) are hashed by the migration and keep working."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken
from anonweb.accounts.services import api_token_create

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _stored_anywhere(text: str) -> list[str]:
    """The tables holding ``text`` in any column."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 (names from the schema)
            if any(text in str(value) for row in cursor.fetchall() for value in row):
                found.append(table)
    return found


def test_the_key_works_and_no_table_holds_it(officer, dataset):
    key = api_token_create(user=officer)
    assert _client(key).get("/api/v1/datasets/").status_code == 200
    assert _stored_anywhere(key) == []
    assert ApiToken.objects.get(user=officer).digest == hashlib.sha256(key.encode()).hexdigest()


def test_the_digest_is_not_a_key(officer, dataset):
    api_token_create(user=officer)
    digest = ApiToken.objects.get(user=officer).digest
    assert _client(digest).get("/api/v1/datasets/").status_code == 401


def test_an_inactive_user_s_token_is_refused(officer, dataset):
    key = api_token_create(user=officer)
    officer.is_active = False
    officer.save()
    assert _client(key).get("/api/v1/datasets/").status_code == 401


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_plain_tokens_made_before_are_hashed_and_keep_working(team):
    from django.db.migrations.executor import MigrationExecutor

    from tests.web.factories import Role, member

    officer = member(team, Role.PRIVACY_OFFICER, username="olivia")
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0002_team_groups")])
    before = [("accounts", "0002_team_groups"), ("authtoken", "0004_alter_tokenproxy_options")]
    old = executor.loader.project_state(before).apps
    key = "0123456789abcdef0123456789abcdef01234567"
    try:
        old.get_model("authtoken", "Token").objects.create(key=key, user_id=officer.pk)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert _stored_anywhere(key) == []
    assert _client(key).get("/api/v1/datasets/").status_code == 200


def test_the_admin_lists_tokens_without_making_plain_ones(client):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root", "root@example.org", "x" * 20)
    api_token_create(user=root)
    client.force_login(root)
    listing = client.get("/admin/accounts/apitoken/")
    assert listing.status_code == 200 and b"root" in listing.content
    assert client.get("/admin/accounts/apitoken/add/").status_code == 403
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
