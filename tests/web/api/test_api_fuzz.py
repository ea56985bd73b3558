"""The API against its own OpenAPI schema: hypothesis draws operations, path and query values
and JSON bodies from the schema that drf-spectacular publishes (and, one time in three, from
nowhere: wrong types, deep nesting, huge numbers, text where a number goes), sends them as a
privacy officer, a data steward and an analyst, and every answer must be below 500 and, for a
refusal, JSON. Bounded in examples and in time (FUZZ_SECONDS)."""

from __future__ import annotations

import time
from collections import Counter
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.web.api.test_api import api
from tests.web.conftest import small_table

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

FUZZ_SECONDS = 60
EXAMPLES = 2500
BIG = [0, 1, -1, 2**31, 2**63 - 1, 2**63, 10**30, 1e308, -1e308, 0.5]

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_HOSTILE_TEXTS = (
    "[" * 1000 + "]" * 1000,
    '{"a": ' * 200 + "1" + "}" * 200,
    "{not json",
    "\ufeff{}",
    '"\\ud800"',
    "1e999999",
    "",
)
_HOSTILE = st.sampled_from(_HOSTILE_TEXTS)


def from_schema(schema: dict, components: dict, depth: int = 0) -> st.SearchStrategy:
    """Values shaped by a JSON schema (enough of it for drf-spectacular's output), now and then
    past its bounds."""
    if "$ref" in schema:
        return from_schema(components[schema["$ref"].rsplit("/", 1)[1]], components, depth)
    if depth > 4:
        return _JSON
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            return st.one_of([from_schema(s, components, depth + 1) for s in schema[key]])
    if "enum" in schema:
        return st.sampled_from([v for v in schema["enum"] if v is not None] or [None]) | _JSON
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum", -(2**63)), schema.get("maximum", 2**63)
        return st.integers(low, high) | st.sampled_from(BIG)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(BIG)
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        return st.text(max_size=schema.get("maxLength", 30) or 30)
    if kind == "array":
        items = from_schema(schema.get("items", {}), components, depth + 1)
        return st.lists(items, max_size=4)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in properties]
        optional = [k for k in properties if k not in required]
        return st.fixed_dictionaries(
            {k: from_schema(properties[k], components, depth + 1) for k in required},
            optional={k: from_schema(properties[k], components, depth + 1) for k in optional},
        )
    return _JSON


@pytest.fixture
def world(officer, steward, analyst, dataset):
    import pandas as pd

    from anonweb.jobs.models import Job, JobKind, JobStatus
    from anonweb.jobs.publication import release_create
    from anonweb.releases.services import release_approve

    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
        created_by=officer,
    )
    frame = pd.DataFrame({"age": ["[20, 40[", "[40, 60["], "disease": ["flu", "cold"]})
    release = release_create(job=job, frame=frame, plan={}, report={}, title="r")
    release_approve(user=steward, release=release)
    return {
        "clients": {"officer": api(officer), "steward": api(steward), "analyst": api(analyst)},
        "ids": {"dataset_id": dataset.pk, "job_id": job.pk, "release_id": release.pk},
        "columns": list(small_table().columns),
    }


def test_no_request_drawn_from_the_schema_gets_a_server_error(world):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    operations = [
        (path, method, op)
        for path, item in sorted(schema["paths"].items())
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]
    answers: Counter = Counter()
    started = time.monotonic()

    def path_value(name: str) -> st.SearchStrategy:
        if name == "column":
            return st.sampled_from(world["columns"]) | st.text(min_size=1, max_size=12)
        real = world["ids"].get(name, 1)
        return st.sampled_from([real] * 6 + [0, 12345, 2**63 - 1, 10**25])

    @st.composite
    def request(draw):
        path, method, op = draw(st.sampled_from(operations))
        url = path
        for parameter in op.get("parameters", []):
            if parameter["in"] == "path":
                value = draw(path_value(parameter["name"]))
                url = url.replace("{" + parameter["name"] + "}", quote(str(value), safe=""))
        query = {}
        for parameter in op.get("parameters", []):
            if parameter["in"] == "query" and draw(st.booleans()):
                shaped = from_schema(parameter.get("schema", {}), components)
                query[parameter["name"]] = draw(shaped | st.text(max_size=10))
        body = None
        content = op.get("requestBody", {}).get("content", {})
        if "application/json" in content:
            shaped = from_schema(content["application/json"]["schema"], components)
            body = draw(st.one_of(shaped, shaped, _JSON, _HOSTILE))
        caller = draw(st.sampled_from(["officer", "officer", "steward", "analyst"]))
        return caller, method, url, query, body, "multipart/form-data" in content

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(request())
    def run(drawn):
        if time.monotonic() - started > FUZZ_SECONDS:
            answers["not sent (time is up)"] += 1
            return
        caller, method, url, query, body, multipart = drawn
        client = world["clients"][caller]
        if query:
            url += "?" + urlencode({k: str(v) for k, v in query.items()})
        if multipart:
            response = client.generic(
                method.upper(), url, b"--x--", content_type="multipart/form-data; boundary=x"
            )
        elif isinstance(body, str) and body in _HOSTILE_TEXTS:
            response = client.generic(method.upper(), url, body, content_type="application/json")
        elif body is not None:
            response = getattr(client, method)(url, body, format="json")
        else:
            response = getattr(client, method)(url)
        if response.streaming:  # a download: read to its end, which closes its file
            b"".join(response.streaming_content)
        assert response.status_code < 500, (method, url, body, response.content[:500])
        if response.status_code >= 400:
            assert response["Content-Type"].startswith("application/json"), (method, url)
            assert set(response.json()) & {"error", "errors", "findings"}, response.json()
        answers[f"{response.status_code}"] += 1

    run()
    sent = sum(v for k, v in answers.items() if k.isdigit())
    assert sent >= 100, answers
    print(f"\nAPI fuzz: {sent} requests in {time.monotonic() - started:.0f} s, {dict(answers)}")
