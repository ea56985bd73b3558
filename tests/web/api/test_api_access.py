"""Every API route, found in the URL configuration and matched with the schema, answered as
anonymous, as each role of the team and as a member of another team, against one rule:

* anonymous: 401 with a JSON ``{"error"}`` (never the login page);
* another team's member: 404 for any route about an object; a collection route shows none of
  the team's objects;
* a role the operation declares in the schema (``x-roles``): never 401/403/404/405/5xx;
* any other role of the team: 403 or 404 (or a collection listing none of the team's objects).

Write operations are sent the request example from the schema. A new route is covered as soon
as it is in the URL configuration: the test fails until the schema documents it with its roles
(and an example body for a write).
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from anonweb.accounts.models import ApiToken, Role
from anonweb.jobs.models import Job, JobKind, JobStatus
from tests.web.factories import member

pytestmark = pytest.mark.django_db

NOT_ROUTES = {"api:schema", "api:docs", "api:not-found"}
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def api_routes() -> list[tuple[str, str, object]]:
    """(name, route with Django converters, view class) of every API route in the URL conf."""
    found = []

    def walk(patterns, prefix, namespace):
        for p in patterns:
            if isinstance(p, URLResolver):
                ns = f"{namespace}:{p.namespace}" if p.namespace and namespace else p.namespace
                walk(p.url_patterns, prefix + str(p.pattern), ns or namespace)
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                name = f"{namespace}:{p.name}" if namespace else p.name
                if route.startswith("api/") and name not in NOT_ROUTES:
                    found.append((name, route, getattr(p.callback, "cls", None)))

    walk(get_resolver().url_patterns, "", None)
    return found


def openapi_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def operations() -> list[tuple[str, str, str]]:
    out = []
    for name, route, cls in api_routes():
        assert cls is not None, f"{name} is not a DRF view"
        for method in HTTP_METHODS:
            if hasattr(cls, method):
                out.append((name, route, method))
    return out


@pytest.fixture(scope="module")
def schema():
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def test_the_schema_documents_exactly_the_routes(schema):
    in_urls = {(openapi_path(route), method) for _name, route, method in operations()}
    in_schema = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }
    assert in_urls == in_schema
    assert len(in_urls) >= 17


JOB_NOTE = "profiled the clinic's extract"


@pytest.fixture
def world(team, other_team, officer, steward, analyst, outsider, dataset):
    """The team's objects (a dataset, a finished job, an approved release) and a client per
    caller, each authenticated by its own token."""
    from rest_framework.test import APIClient

    from anonweb.datasets.services import dataset_profile
    from anonweb.jobs.publication import release_create
    from anonweb.releases.services import release_approve

    Job.objects.create(
        team=team,
        dataset=dataset,
        kind=JobKind.PROFILE,
        status=JobStatus.SUCCEEDED,
        created_by=officer,
        message=JOB_NOTE,
        result=dataset_profile(dataset=dataset, progress=lambda *a: None),
    )
    job = Job.objects.create(
        team=team,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
        created_by=officer,
    )
    release = release_create(
        job=job, frame=pd.DataFrame({"age": ["20-29"]}), plan={}, report={}, title="r"
    )
    release_approve(user=steward, release=release, note="fine")
    second_steward = member(team, Role.DATA_STEWARD, username="sue")
    clients = {"anonymous": APIClient()}
    for who, user in (
        ("outsider", outsider),
        (Role.ANALYST.value, analyst),
        (Role.DATA_STEWARD.value, second_steward),
        (Role.PRIVACY_OFFICER.value, officer),
    ):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
        clients[who] = client
    return {
        "clients": clients,
        "args": {
            "dataset_id": dataset.pk,
            "job_id": job.pk,
            "release_id": release.pk,
            "column": "age",
        },
        # a job's message: only the team's officers and stewards see the team's jobs
        "secrets": [team.name, team.slug, dataset.name, JOB_NOTE],
    }


def url_for(route: str, args: dict) -> str:
    def fill(match):
        name = match.group(1)
        assert name in args, f"the access test has no object for the URL parameter {name!r}"
        return str(args[name])

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", fill, route)


def call(client, method, url, example):
    if method == "get":
        response = client.get(url)
    else:
        body = json.dumps(example if example is not None else {})
        response = getattr(client, method)(url, data=body, content_type="application/json")
    if response.streaming:  # a download: reading it to the end closes the file
        response.body = b"".join(response.streaming_content)
    return response


def example_of(operation: dict):
    content = (operation.get("requestBody") or {}).get("content", {})
    for media in content.values():
        for example in (media.get("examples") or {}).values():
            return example["value"]
    return None


def is_json_error(response) -> bool:
    if not response["Content-Type"].startswith("application/json"):
        return False
    body = response.json()
    return isinstance(body, dict) and ("error" in body or "errors" in body)


def shows_nothing_of_the_team(response, secrets) -> bool:
    text = response.content.decode()
    return response.status_code < 300 and not any(f'"{s}"' in text for s in secrets)


@pytest.mark.parametrize("name,route,method", operations(), ids=lambda v: str(v))
def test_every_route_answers_each_caller_by_the_rule(world, schema, name, route, method):
    operation = schema["paths"][openapi_path(route)][method]
    roles = operation.get("x-roles")
    assert roles, f"{method.upper()} {route}: the schema must name its roles (x-roles)"
    assert set(roles) <= set(Role.values)
    example = example_of(operation)
    if method != "get" and "requestBody" in operation and example is None:
        content = operation["requestBody"]["content"]
        assert "multipart/form-data" in content, f"{method.upper()} {route}: give an example body"
    url = url_for(route, world["args"])
    has_object = "<" in route
    where = f"{method.upper()} {url}"

    response = call(world["clients"]["anonymous"], method, url, example)
    assert response.status_code == 401, where
    assert is_json_error(response), where

    response = call(world["clients"]["outsider"], method, url, example)
    if has_object:
        assert response.status_code == 404, f"{where} as another team's member"
        assert is_json_error(response), where
    else:
        assert response.status_code not in (401, 403, 404, 405), where
        assert response.status_code < 500, where
        assert response.status_code >= 400 or shows_nothing_of_the_team(
            response, world["secrets"]
        ), f"{where}: another team's member sees the team's objects"

    # Refused callers first: an allowed write (a cancellation, a review) may change the state.
    order = sorted(Role.values, key=lambda r: r in roles)
    for role in order:
        response = call(world["clients"][role], method, url, example)
        who = f"{where} as {role}"
        assert response.status_code < 500, f"{who}: {response.content[:300]!r}"
        if response.status_code >= 400:
            assert is_json_error(response), f"{who}: {response.content[:300]!r}"
        if role in roles:
            assert response.status_code not in (401, 403, 404, 405), (
                f"{who}: {response.status_code} {response.content[:300]!r}"
            )
        else:
            refused = response.status_code in (403, 404)
            assert refused or (
                not has_object
                and method == "get"
                and shows_nothing_of_the_team(response, world["secrets"])
            ), f"{who} is not among {roles}: {response.status_code} {response.content[:300]!r}"
