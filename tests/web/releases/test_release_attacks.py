"""Every record-level release is attacked when it is published: the figures go to the internal
report, the release page and ``GET /api/v1/releases/{id}/attacks/``, for officers and stewards
only; a plan asking for attack evaluation holds out a control before it runs."""

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from anonweb.core.attacks.run import NO_CONTROL
from anonweb.datasets.storage import load_frame
from anonweb.releases.storage import release_dir
from tests.web.api.test_api import api
from tests.web.conftest import csv_upload
from tests.web.releases.test_published_report import launch

pytestmark = pytest.mark.django_db

K_PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {"age": {"builder": "interval", "width": 10}},
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 1}}},
    ],
}


@pytest.fixture
def patients(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    rng = np.random.default_rng(3)
    n = 300
    df = pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": [f"4{z:04d}" for z in rng.integers(7600, 7700, n)],
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "gastritis", "cancer"], n),
        }
    )
    ds = dataset_create(user=officer, team=team, upload=csv_upload(df), name="patients300")
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "disease": "sensitive",
        },
    )


def test_a_plan_asking_for_attacks_holds_out_a_control_and_reports_the_excess(
    client, officer, steward, patients
):
    plan = {**K_PLAN, "attacks": {"holdout": 0.2, "targets": 500}}
    release = launch(officer, patients, plan, "attacked")
    assert release.rows == 240  # the 60 held-out people are not in the release
    attacks = release.report["attacks"]
    assert attacks["known"] == ["age", "sex"] and attacks["sensitive"] == ["disease"]
    assert attacks["control_records"] == 60
    link = attacks["linkage"]
    assert link["targets"] == 240 and link["control_targets"] == 60
    assert link["control_rate"] is not None and link["ci"][0] <= link["excess"] <= link["ci"][1]
    # age in decades and sex: classes of several people, so nobody is linked for sure
    assert link["rate"] < 0.5
    assert attacks["note"] is None
    assert "attacks" not in release.published_report  # analysts' report: nothing of the source
    # the lineage kept for conflict checks names rows of the whole source, the held-out ones
    # among none of them
    folder = release_dir(release.storage_key)
    rows = np.load(folder / "private" / "source_rows.npy")
    published = pd.read_parquet(folder / "data.parquet")
    whole = load_frame(patients.storage_key)
    assert len(set(rows.tolist())) == 240 and rows.max() < 300
    assert (whole["sex"].to_numpy()[rows] == published["sex"].to_numpy()).all()
    assert (whole["disease"].to_numpy()[rows] == published["disease"].to_numpy()).all()

    answer = api(steward).get(f"/api/v1/releases/{release.pk}/attacks/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["release"] == release.pk and body["linkage"] == link
    assert set(body["membership"]) >= {"auc", "ci"}

    client.force_login(officer)
    html = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert 'data-testid="attacks"' in html
    assert "An attacker who knows age and sex of someone in the release can link them" in html


def test_without_a_holdout_the_release_is_attacked_and_the_excess_is_not_measured(
    client, officer, patients
):
    release = launch(officer, patients, K_PLAN, "no control")
    assert release.rows == 300
    attacks = release.report["attacks"]
    assert attacks["linkage"]["excess"] is None and attacks["note"] == NO_CONTROL
    client.force_login(officer)
    html = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert 'data-testid="attacks-note"' in html and "cannot be measured" in html


def test_analysts_never_see_the_attacks(client, officer, steward, analyst, patients):
    from anonweb.releases.services import release_review

    release = launch(officer, patients, K_PLAN, "approved")
    release_review(
        user=steward, release=release, decision="approve", override="Reviewed for the test."
    )
    assert api(analyst).get(f"/api/v1/releases/{release.pk}/attacks/").status_code == 403
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert page.status_code == 200 and 'data-testid="attacks"' not in page.content.decode()


def test_an_aggregate_release_has_no_record_level_attack_figures(officer, steward, patients):
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=patients, epsilon=5.0)
    plan = {
        "version": 1,
        "steps": [
            {
                "kind": "dp_release",
                "params": {
                    "kind": "histogram",
                    "epsilon": 1.0,
                    "columns": ["disease"],
                    "categories": {"disease": ["flu", "gastritis", "cancer"]},
                    "count_missing": False,
                },
            }
        ],
    }
    release = launch(officer, patients, plan, "histogram")
    assert "attacks" not in release.report
    # what is served is why the record-level attacks were not run, and the reconstruction
    answer = api(officer).get(f"/api/v1/releases/{release.pk}/attacks/")
    assert answer.status_code == 200 and "linkage" not in answer.json()
    assert answer.json()["skipped"] == "the release publishes aggregates, not records"
    assert answer.json()["reconstruction"]["determined"] == 0


def test_the_team_policy_caps_the_attacks_at_the_gate(client, officer, steward, patients):
    from anonweb.core.release.policy import PolicyThresholds
    from anonweb.releases.gate import release_policy_update, thresholds_for

    release_policy_update(
        user=steward,
        team=patients.team,
        thresholds=PolicyThresholds(k=1, l=1, max_attack_excess=0.01, max_membership_auc=0.9),
    )
    assert thresholds_for(team=patients.team).max_attack_excess == 0.01
    plan = {
        **K_PLAN,
        "steps": [{"kind": "drop", "params": {"columns": ["name", "zip"]}}],  # ages kept exact
        "attacks": {"holdout": 0.2},
    }
    release = launch(officer, patients, plan, "exact ages")
    excess = release.report["attacks"]["linkage"]["excess"]
    assert excess > 0.01
    found = [f for f in release.gate["findings"] if f["code"] == "attack_excess"]
    assert any(f["facts"]["attack"] == "linkage" for f in found)
    assert all(f["severity"] == "block" for f in found)

    client.force_login(steward)
    html = client.get(reverse("releases:policy")).content.decode()
    assert 'name="max_attack_excess"' in html and 'value="0.01"' in html
