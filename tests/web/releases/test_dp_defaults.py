"""Private defaults: the privacy unit is the tagged identifier, categories and bounds come from
the officer (a suggestion read from the data is marked so and refused at launch until
confirmed), and ε splits are exact."""

import json

import pytest
from django.urls import reverse

from anonweb.core.errors import PlanError
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobStatus
from anonweb.jobs.services import anonymize_launch
from anonweb.releases.budget import budget_set, ledger_for

pytestmark = pytest.mark.django_db


def _suggest(client, dataset, mode, epsilon=2):
    page = client.get(
        reverse("jobs:plan", args=[dataset.pk]),
        {"mode": mode, "epsilon": epsilon, "k": 5, "suppression": 0, "identifiers": "drop"},
    )
    assert page.status_code == 200
    return page, json.loads(page.context["form"].initial["plan"])


def test_the_suggested_dp_plan_counts_people_by_the_tagged_identifier(client, officer, dataset):
    """One person with many rows counted many times; now each keeps one row."""
    client.force_login(officer)
    page, plan = _suggest(client, dataset, "dp_histogram")
    assert plan["steps"] == [
        {
            "kind": "dp_release",
            "params": {
                "kind": "histogram",
                "epsilon": 2.0,
                "columns": ["disease"],
                "delta": 1e-6,  # keys selected privately: no category read from the data
                "identifier": "name",
                "max_contributions": 1,
            },
        }
    ]
    assert (
        "a person is a value of &#x27;name&#x27; (the tagged identifier, unique per row)"
        in page.content.decode()
    )


def _namesakes(officer, team):
    """Issue 19.2 in small: ``name`` repeats (two Ann Lees, three Bob Rays), ``ssn`` is unique;
    both are tagged identifiers, ``name`` first."""
    import pandas as pd

    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    table = pd.DataFrame(
        {
            "name": ["Ann Lee", "Ann Lee", "Bob Ray", "Bob Ray", "Bob Ray", "Cy Dunn", "Di Fox"],
            "ssn": [f"078-05-11{i:02d}" for i in range(7)],
            "age": [29, 22, 27, 43, 52, 47, 33],
            "disease": ["flu", "flu", "gastritis", "cancer", "flu", "gastritis", "flu"],
        }
    )
    ds = dataset_create(user=officer, team=team, upload=csv_upload(table), name="namesakes")
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"name": "identifier", "ssn": "identifier", "age": "other", "disease": "sensitive"},
    )


def test_the_unit_defaults_to_the_identifier_unique_per_row(client, officer, team):
    dataset = _namesakes(officer, team)
    client.force_login(officer)
    page, plan = _suggest(client, dataset, "dp_histogram")
    (step,) = plan["steps"]
    assert step["params"]["identifier"] == "ssn"
    assert page.context["suggest"]["unit"].value() == "ssn"
    text = page.content.decode()
    assert "a person is a value of &#x27;ssn&#x27; (the tagged identifier, unique per row)" in text
    assert page.context["contributions"]["rows_dropped"] == 0
    assert "7 people (values of &#x27;ssn&#x27;) in 7 rows" in text


def test_choosing_a_unit_shows_its_rows_per_person_and_the_rows_dropped(client, officer, team):
    dataset = _namesakes(officer, team)
    client.force_login(officer)
    page = client.get(
        reverse("jobs:plan", args=[dataset.pk]),
        {"unit": "name", "mode": "dp_histogram", "epsilon": 1, "k": 5, "suppression": 0,
         "identifiers": "drop"},
    )  # fmt: skip
    plan = json.loads(page.context["form"].initial["plan"])
    assert plan["steps"][0]["params"]["identifier"] == "name"
    shown = page.context["contributions"]
    assert shown["max_rows_per_person"] == 3
    assert shown["rows_per_person"] == {"1": 2, "2": 1, "3": 1}
    assert shown["rows_dropped"] == 3
    text = page.content.decode()
    assert 'data-testid="unit-contributions"' in text and "3 row(s) of 2 people are dropped" in text
    # each row as the unit: nothing is bounded
    page = client.get(
        reverse("jobs:plan", args=[dataset.pk]),
        {"unit": "", "mode": "dp_histogram", "epsilon": 1, "k": 5, "suppression": 0,
         "identifiers": "drop"},
    )  # fmt: skip
    plan = json.loads(page.context["form"].initial["plan"])
    assert "identifier" not in plan["steps"][0]["params"]
    assert "each row is a person" in page.content.decode()


def test_without_an_identifier_the_page_says_each_row_is_a_person(client, officer, dataset):
    from anonweb.datasets.services import dataset_set_tags

    dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"name": "other", "age": "sensitive", "disease": "sensitive"},
    )
    client.force_login(officer)
    page, plan = _suggest(client, dataset, "dp_histogram", epsilon=2)
    assert "each row is a person" in page.content.decode()
    age, disease = plan["steps"]
    assert "identifier" not in age["params"] and "identifier" not in disease["params"]
    # A numeric column: counts over public bins between bounds the officer must confirm.
    assert age["params"]["kind"] == "range" and age["params"]["bins"] == 10
    assert age["params"]["bounds"] == [20.0, 60.0]
    assert age["params"]["read_from_data"] == ["bounds"]
    # The exact split: two shares that add up to 2 exactly.
    assert age["params"]["epsilon"] + disease["params"]["epsilon"] == 2.0


def test_local_dp_suggestions_are_marked_as_read_from_the_data(client, officer, dataset):
    client.force_login(officer)
    page, plan = _suggest(client, dataset, "ldp", epsilon=1)
    assert plan["steps"][-1] == {
        "kind": "ldp_randomized_response",
        "params": {
            "column": "disease",
            "epsilon": 1.0,
            "categories": ["cancer", "flu", "gastritis"],
            "read_from_data": ["categories"],
        },
    }
    text = page.content.decode()
    assert 'data-testid="read-from-data"' in text
    assert "Read from the data: not private." in text


def test_a_local_dp_suggestion_declares_missing_as_a_category_of_its_own(client, officer, team):
    """Randomized response never adds "(missing)" because one table has it (issue 20.1): the
    suggestion declares it like any other category, for the officer to confirm."""
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload, small_table

    table = small_table()
    table.loc[2, "disease"] = None
    ds = dataset_create(user=officer, team=team, upload=csv_upload(table), name="gaps")
    ds = dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"name": "identifier", "age": "quasi_identifier", "disease": "sensitive"},
    )
    client.force_login(officer)
    _, plan = _suggest(client, ds, "ldp", epsilon=1)
    assert plan["steps"][-1]["params"]["categories"] == ["cancer", "flu", "gastritis", "(missing)"]


def test_a_launch_is_refused_until_the_values_read_from_the_data_are_confirmed(
    client, officer, steward, dataset
):
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    client.force_login(officer)
    _, plan = _suggest(client, dataset, "ldp", epsilon=1)
    # the page: the preview works (nothing runs), the launch is refused
    data = {
        "title": "ldp",
        "purpose": "testing",
        "recipient": "test team",
        "plan": json.dumps(plan),
    }
    preview = client.post(reverse("jobs:plan", args=[dataset.pk]), {**data, "preview": "1"})
    assert preview.status_code == 200 and "read_from_data" in preview.content.decode()
    refused = client.post(reverse("jobs:plan", args=[dataset.pk]), data)
    assert refused.status_code == 400
    assert "the categories were read from the data: not private" in refused.content.decode()
    assert not Job.objects.exists() and ledger_for(dataset).spent == 0
    # the service (the API and the command line go through it too)
    with pytest.raises(PlanError, match="remove 'read_from_data' to confirm them"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=plan,
            title="ldp",
            purpose="testing",
            recipient="test team",
        )
    del plan["steps"][-1]["params"]["read_from_data"]
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=plan,
        title="ldp",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error


def test_randomized_response_without_categories_is_refused_at_launch(officer, steward, dataset):
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    plan = {
        "version": 1,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "ldp_randomized_response", "params": {"column": "disease", "epsilon": 1}},
        ],
    }
    with pytest.raises(PlanError, match="step 2 .* declare the categories"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=plan,
            title="ldp",
            purpose="testing",
            recipient="test team",
        )
    assert not Job.objects.exists()


def test_three_columns_at_epsilon_two_fit_a_budget_of_exactly_two(client, officer, steward, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    ds = dataset_create(user=officer, team=team, upload=csv_upload(), name="three")
    ds = dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"name": "sensitive", "sex": "sensitive", "disease": "sensitive"},
    )
    budget_set(user=steward, dataset=ds, epsilon=2.0, delta=1e-5)
    client.force_login(officer)
    _, plan = _suggest(client, ds, "dp_histogram", epsilon=2)
    assert len(plan["steps"]) == 3
    anonymize_launch(
        user=officer, dataset=ds, plan=plan, title="three", purpose="testing", recipient="test team"
    )
    assert ledger_for(ds).remaining == pytest.approx(0.0, abs=1e-12)
