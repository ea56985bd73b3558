"""A DP release reads as one: each statistic is a chart with its 95% interval, bins are public,
and privately selected keys are described without counting the ones held back."""

import html
import json
import re

import pytest
from django.urls import reverse

from anonweb.core.numbers import for_people
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobStatus
from anonweb.jobs.services import anonymize_launch
from anonweb.releases.budget import budget_set

pytestmark = pytest.mark.django_db


def test_the_release_page_charts_each_statistic_with_its_interval(
    client, officer, steward, dataset
):
    budget_set(user=steward, dataset=dataset, epsilon=3.0, delta=1e-5)
    steps = [
        {"kind": "histogram", "epsilon": 1.0, "columns": ["disease"], "delta": 1e-6},
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 5},
    ]
    plan = {"version": 1, "steps": [{"kind": "dp_release", "params": p} for p in steps]}
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=plan,
        title="dp",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    assert "vendor/plotly/plotly-cartesian.min.js" in page
    figures = {
        m.group(1): json.loads(m.group(2))
        for m in re.finditer(
            r'<script id="(chart-dp-step-\d+)-data" type="application/json">(.*?)</script>',
            page,
            re.S,
        )
    }
    assert sorted(figures) == ["chart-dp-step-1", "chart-dp-step-2"]
    report = job.release.report["steps"]
    for i, key in ((1, "ci95_halfwidth"), (2, "ci95_halfwidth")):
        bars = figures[f"chart-dp-step-{i}"]["data"][0]
        assert bars["error_y"]["value"] == pytest.approx(report[i - 1][key])
    assert figures["chart-dp-step-2"]["data"][0]["x"] == [
        "[0, 20)",
        "[20, 40)",
        "[40, 60)",
        "[60, 80)",
        "[80, 100]",
    ]
    held_back = re.search(r'data-testid="suppressed-keys">([^<]*)<', page).group(1)
    assert (
        held_back
        == "The categories were selected privately: keys below the threshold are not released."
    )
    assert "Bins are public: equal widths between the declared bounds 0.0 and 100.0" in page
    # An analyst reads the published report: the same charts, once the release is approved.
    from anonweb.releases.services import release_approve
    from tests.web.factories import Role, member

    release_approve(user=steward, release=job.release, note="ok")
    client.force_login(member(dataset.team, Role.ANALYST))
    seen = client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    assert re.findall(r'<div id="(chart-dp-step-\d+)"', seen) == sorted(figures)
    units = re.findall(r'data-testid="privacy-unit">([^<]*)<', page)
    assert units == ["Privacy unit: each row is a person."] * 2


def test_parameters_opendp_refuses_are_a_plan_error_on_the_page(client, officer, steward, dataset):
    """OpenDP cannot find a key-selection threshold this small a δ allows at this ε: the page
    lists it as a plan problem (400), nothing is queued, nothing reaches a worker."""
    budget_set(user=steward, dataset=dataset, epsilon=3.0, delta=1e-5)
    query = {"kind": "histogram", "epsilon": 1e-7, "columns": ["disease"], "delta": 1e-300}
    plan = {"version": 1, "steps": [{"kind": "dp_release", "params": query}]}
    client.force_login(officer)
    response = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "dp", "plan": json.dumps(plan), "purpose": "testing", "recipient": "test team"},
    )
    assert response.status_code == 400
    assert "too small for key selection" in response.content.decode()
    from anonweb.jobs.models import Job

    assert not Job.objects.exists()


def test_a_range_states_one_accuracy_and_its_gate_cites_the_dp_policy(
    client, officer, steward, dataset
):
    """Issue 19.8: the same histogram said ±45.43 in the text and ±131 on the chart and in the
    utility table. Now the text, the chart and the utility table give one half-width per
    statistic; and the gate of a DP release cites its budget, not k, l or risk (19.10)."""
    budget_set(user=steward, dataset=dataset, epsilon=3.0)
    params = {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 5}
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan={"version": 1, "steps": [{"kind": "dp_release", "params": params}]},
        title="dp",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    (step,) = job.release.report["steps"]
    half = step["ci95_halfwidth"]
    written = f"±{for_people(half)}"
    text = html.unescape(re.search(r'data-testid="dp-accuracy">([^<]*)<', page).group(1))
    assert f"each bin's count is within {written} of the truth" in text
    chart = json.loads(
        re.search(r'id="chart-dp-step-1-data" type="application/json">(.*?)</script>', page).group(
            1
        )
    )
    assert chart["data"][0]["error_y"]["value"] == pytest.approx(half)
    assert written in chart["layout"]["title"]["text"]
    intervals = re.findall(r'data-testid="dp-interval">[^<]*<span class="meta">\((±[^,)]*)', page)
    assert intervals[:5] == [written] * 5  # the bins; the cumulative counts follow with theirs
    cumulative = [f"±{for_people(h)}" for h in step["cumulative_ci95_halfwidth"]]
    assert intervals[5:] == cumulative
    policy = html.unescape(re.search(r'data-testid="gate-policy">([^<]*)<', page).group(1))
    assert (
        "this release spends ε = 1," in policy
        and "charged to the source's privacy budget" in policy
    )
    assert "k ≥" not in page.split('data-testid="findings"')[1].split("</section>")[0]


def test_rows_dropped_by_the_unit_are_told_to_staff_and_kept_from_analysts(
    client, officer, steward, team
):
    """Issue 19.2: the report did not say rows were dropped. Officers and stewards read how
    many (a source figure); the utility table's interval widens by them; analysts see neither."""
    from anonweb.releases.services import release_approve
    from tests.web.factories import Role, member
    from tests.web.releases.test_dp_defaults import _namesakes

    dataset = _namesakes(officer, team)
    budget_set(user=steward, dataset=dataset, epsilon=3.0)
    params = {
        "kind": "histogram",
        "epsilon": 1.0,
        "columns": ["disease"],
        "categories": {"disease": ["cancer", "flu", "gastritis"]},
        "identifier": "name",
    }
    plan = {
        "version": 1,
        "steps": [{"kind": "dp_release", "params": params}],
    }
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="dp", purpose="testing", recipient="t"
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    client.force_login(steward)
    page = html.unescape(
        client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    )
    told = re.search(r'data-testid="contribution-bounding">([^<]*)<', page).group(1)
    assert "4 people (values of 'name') in 7 rows" in told and "3 row(s) of 2 people" in told
    assert "+ up to 2 rows dropped by contribution bounding" in page  # flu: Ann twice, Bob once
    release_approve(user=steward, release=job.release, note="ok")
    client.force_login(member(dataset.team, Role.ANALYST))
    seen = client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    assert "contribution-bounding" not in seen and "rows dropped" not in seen
    assert "contribution_bounding" not in json.dumps(job.release.published_report)
