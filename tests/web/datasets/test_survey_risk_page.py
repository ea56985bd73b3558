"""The dataset page's survey risk: an officer names the weight and household columns and asks
for SUDA2 on the assess form; the profile job measures them; the page shows the figures and
the charts (records by SUDA score, households by risk) to the team, and the records at highest
risk, with their raw values, to privacy officers only."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from django.test import TestCase
from django.urls import reverse

from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from tests.web.conftest import csv_upload

pytestmark = pytest.mark.django_db

# sdcMicro's test_indivRisk.R table with household ids and a rare value to spot in the page
SURVEY = pd.DataFrame(
    {
        "A": ["a2", "a3", "a2", "a2", "a3", "a3", "Zephyrine", "a2"],
        "B": [3, 3, 3, 3, 3, 3, 4, 3],
        "C": [1, 3, 1, 2, 1, 1, 1, 1],
        "weight": [18.0, 45.5, 39.0, 17.0, 92.0, 8.0, 123.5, 51],
        "hh": [1, 1, 2, 2, 3, 3, 4, 4],
    }
)


@pytest.fixture
def survey(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    ds = dataset_create(
        user=officer, team=team, upload=csv_upload(SURVEY, name="survey.csv"), name="survey"
    )
    qi = "quasi_identifier"
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"A": qi, "B": qi, "C": qi, "weight": "other", "hh": "other"},
    )


def _assess(client, ds, **fields) -> Job:
    client.post(reverse("datasets:assess", args=[ds.pk]), fields)
    job = Job.objects.filter(dataset=ds, kind=JobKind.PROFILE).latest("pk")
    with TestCase.captureOnCommitCallbacks(execute=True):
        job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    return job


def _charts(page: str) -> dict[str, dict]:
    import re

    out = {}
    for chart_id, body in re.findall(
        r'<script id="(chart-[a-z-]+)-data" type="application/json">(.*?)</script>', page, re.S
    ):
        out[chart_id] = json.loads(body)
    return out


def test_officer_sees_survey_figures_charts_and_highest_records(client, survey, officer):
    client.force_login(officer)
    job = _assess(client, survey, weights="weight", household="hh", suda2="1", suda2_max_size="3")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.params == {
        "weights": "weight",
        "household": "hh",
        "suda2": True,
        "suda2_max_size": 3,
    }
    s = job.result["risk"]["survey"]
    assert s["individual_risk"]["global"] == pytest.approx(0.04760461, abs=1e-7)
    assert s["household_risk"]["households"] == 4
    page = client.get(reverse("datasets:detail", args=[survey.pk])).content.decode()
    assert 'data-testid="survey-risk"' in page
    charts = _charts(page)
    suda = charts["chart-suda-scores"]["data"][0]
    # three sample uniques: (a3,3,3) and (a2,3,2) score 2, (Zephyrine,4,1) scores 4
    assert dict(zip(suda["x"], suda["y"], strict=True)) == {"0": 5, "2": 2, "4": 1}
    bands = charts["chart-survey-risk"]
    assert sum(bands["data"][0]["y"]) == 4  # households
    assert "Households by household risk" in bands["layout"]["title"]["text"]
    assert 'data-testid="highest-risk-records"' in page
    assert "A=Zephyrine" in page


def test_others_see_the_figures_and_charts_but_no_record(client, survey, officer, steward):
    client.force_login(officer)
    _assess(client, survey, weights="weight", suda2="1")
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[survey.pk])).content.decode()
    assert 'data-testid="survey-risk"' in page
    assert {"chart-suda-scores", "chart-survey-risk"} <= set(_charts(page))
    assert 'data-testid="highest-risk-records"' not in page
    assert "Zephyrine" not in page
    assert "listed for privacy officers" in page


def test_without_survey_fields_the_profile_is_unchanged(client, survey, officer):
    client.force_login(officer)
    job = _assess(client, survey)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.params == {}
    assert "survey" not in job.result["risk"]
    page = client.get(reverse("datasets:detail", args=[survey.pk])).content.decode()
    assert "chart-suda-scores" not in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"weights": "nope"}, "is not a column of survey"),
        ({"household": "A"}, "is tagged quasi-identifier"),
        ({"suda2": "1", "suda2_max_size": "eleven"}, "whole number"),
        ({"suda2": "1", "suda2_max_size": "40"}, "between 1 and 10"),
    ],
)
def test_bad_survey_fields_are_refused_with_a_message(client, survey, officer, fields, message):
    client.force_login(officer)
    response = client.post(reverse("datasets:assess", args=[survey.pk]), fields, follow=True)
    assert message in response.content.decode()
    assert not Job.objects.filter(dataset=survey, kind=JobKind.PROFILE).exists()


def test_api_assessment_takes_the_same_survey_fields(survey, officer):
    from tests.web.api.test_api import api

    client = api(officer)
    url = f"/api/v1/datasets/{survey.pk}/assessments/"
    response = client.post(url, {"weights": "weight", "suda2": True}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["job"])
    assert job.params == {"weights": "weight", "suda2": True, "suda2_max_size": 3}
    with TestCase.captureOnCommitCallbacks(execute=True):
        job_execute(job_id=job.pk, worker="test")
    risk = client.get(f"/api/v1/datasets/{survey.pk}/risk/").json()
    assert risk["survey"]["individual_risk"]["weights"] == "survey weights"
    assert risk["survey"]["suda2"]["max_score"] == 4.0
    bad = client.post(url, {"household": "nope"}, format="json")
    assert bad.status_code == 400
    assert "is not a column of survey" in json.dumps(bad.json())


def test_the_assess_form_asks_for_sdcmicros_exact_series(client, survey, officer):
    client.force_login(officer)
    page = client.get(reverse("datasets:detail", args=[survey.pk])).content.decode()
    assert 'name="risk_method"' in page
    job = _assess(client, survey, weights="weight", risk_method="exact")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.params == {"weights": "weight", "risk_method": "exact"}
    ind = job.result["risk"]["survey"]["individual_risk"]
    # sdcMicro's indivRisk(method = "exact"): the keys of three records 0.01355297 each
    exact = [0.01355297, 0.08579129, 0.01355297, 0.17707583]
    exact += [0.01877883, 0.01877883, 0.03931625, 0.01355297]
    assert ind["method"] == "exact"
    assert ind["global"] == pytest.approx(sum(exact) / 8, abs=1e-8)
    # a method that is not sdcMicro's is refused with a sentence, and no job is queued
    before = Job.objects.count()
    client.post(reverse("datasets:assess", args=[survey.pk]), {"risk_method": "guess"})
    assert Job.objects.count() == before
