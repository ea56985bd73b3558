"""Parameters, plans and audit details are read as tables, with their letters: never as Python
dict text or JSON escapes."""

import json

import pytest
from django.template import Context, Template
from django.urls import reverse

from anonweb.audit.services import audit_record
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.services import job_create
from anonweb.releases.models import Release

pytestmark = pytest.mark.django_db


def _render(value) -> str:
    return Template("{% load display %}{{ value|as_table }}").render(Context({"value": value}))


def test_nested_values_become_tables_and_lists():
    out = _render({"k": 5, "models": [{"kind": "l", "l": 2}], "columns": ["age", "sex"]})
    assert '<table class="kv">' in out
    assert '<tr><th scope="row">k</th><td>5</td></tr>' in out
    assert '<th scope="row">columns</th><td>age, sex</td>' in out
    # a list of objects is a numbered list of tables, one per entry
    assert '<ol class="kv-list"><li><table class="kv">' in out
    assert '<th scope="row">l</th><td>2</td>' in out
    assert "{'" not in out and "[{" not in out


@pytest.mark.parametrize(
    "value,shown",
    [(None, "—"), (True, "yes"), (False, "no"), (0.25, "0.25"), ([], "—"), ({}, "—")],
)
def test_scalars_read_as_words(value, shown):
    assert shown in _render({"x": value})


def test_keys_and_values_are_escaped_and_keep_their_letters():
    out = _render({"<b>é</b>": ["<script>alert(1)</script>", "Genève"]})
    assert "<script>" not in out and "<b>" not in out
    assert "&lt;script&gt;" in out and "&lt;b&gt;é&lt;/b&gt;" in out and "Genève" in out


def test_very_deep_values_end_in_compact_json():
    deep: dict = {"leaf": "é"}
    for _ in range(20):
        deep = {"a": deep}
    out = _render(deep)
    assert out.count("<table") == 8 and '<code class="wrap">' in out
    assert "&quot;leaf&quot;: &quot;é&quot;" in out


def test_audit_page_shows_details_as_a_table(client, officer, team):
    audit_record(
        actor=officer, team=team, action="test.details", details={"columns": ["âge"], "k": 3}
    )
    client.force_login(officer)
    page = client.get(reverse("audit:list")).content.decode()
    assert '<th scope="row">columns</th><td>âge</td>' in page
    assert '<th scope="row">k</th><td>3</td>' in page
    assert "\\u00e2" not in page and "{&quot;" not in page


def _plan_with_accents():
    return {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 10},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}},
        ],
    }


def test_job_and_release_pages_show_parameters_as_tables(client, officer, dataset):
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": _plan_with_accents(), "title": "Extrait été", "purpose": "étude"},
    )
    client.force_login(officer)
    page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert 'data-testid="job-params"' in page
    assert '<th scope="row">title</th><td>Extrait été</td>' in page
    assert '<th scope="row">kind</th><td>optimal_generalization</td>' in page
    job_execute(job_id=job.pk, worker="test")
    release = Release.objects.get(job=Job.objects.get(pk=job.pk))
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    plan = page.split('data-testid="release-plan"')[1].split("</div>")[0]
    assert '<th scope="row">kind</th><td>drop</td>' in plan
    assert '<th scope="row">columns</th><td>name</td>' in plan
    steps = page.split('data-testid="release-steps"')[1].split("</div>")[0]
    assert '<th scope="row">kind</th><td>optimal_generalization</td>' in steps
    assert "{&#x27;" not in plan + steps and "{'" not in plan + steps


def test_plan_page_writes_accents_as_letters(client, officer, team):
    import pandas as pd

    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    df = pd.DataFrame({"ville": ["Genève", "Sion", "Genève", "Sion"], "âge": [30, 31, 40, 41]})
    ds = dataset_create(user=officer, team=team, upload=csv_upload(df), name="villes")
    ds = dataset_set_tags(
        user=officer, dataset=ds, tags={"ville": "quasi_identifier", "âge": "quasi_identifier"}
    )
    client.force_login(officer)
    page = client.get(reverse("jobs:plan", args=[ds.pk]))
    text = page.content.decode()
    area = text.split('name="plan"')[1].split("</textarea>")[0]
    assert "âge" in area and "\\u00e2" not in area
    plan = json.loads(page.context["form"].initial["plan"])
    check = client.post(
        reverse("jobs:plan_check", args=[ds.pk]), json.dumps(plan), content_type="application/json"
    )
    assert "\\u00e2" not in check.content.decode()


def test_plan_to_json_keeps_letters():
    from anonweb.core.release.plan import plan_from_dict, plan_to_json

    text = plan_to_json(
        plan_from_dict({"version": 1, "steps": [{"kind": "drop", "params": {"columns": ["été"]}}]})
    )
    assert "été" in text and "\\u00e9" not in text
