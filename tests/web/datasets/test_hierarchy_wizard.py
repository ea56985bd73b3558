"""Hierarchy wizard: the preview of each builder on the column (groups and their records per
level), the coverage check naming uncovered values, saving, and who may use it."""

import json

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from anonweb.core.io.hierarchy_builders import interval_hierarchy
from anonweb.core.io.hierarchy_preview import hierarchy_preview
from anonweb.datasets.models import Hierarchy as StoredHierarchy

pytestmark = pytest.mark.django_db


def _preview(client, ds, column, spec):
    return client.post(
        reverse("datasets:hierarchy-preview", args=[ds.pk, column]),
        json.dumps(spec),
        content_type="application/json",
    )


def test_core_preview_counts_records_per_group_and_names_uncovered_values():
    values = pd.Series([21, 25, 34, 38, 52, 99])
    counts = np.array([3, 1, 2, 2, 5, 1])
    h = interval_hierarchy(values[:5], width=10, start=20, attribute="age")
    p = hierarchy_preview(h, values, counts, missing=4).to_dict()
    assert p["uncovered"] == [{"value": 99, "records": 1}] and p["covered"] is False
    assert p["missing_records"] == 4
    level1 = p["levels"][1]
    assert [(g["label"], g["values"], g["records"]) for g in level1["listed"]] == [
        ("[20, 30[", 2, 4),
        ("[30, 40[", 2, 4),
        ("[50, 60[", 1, 5),
    ]
    assert (level1["groups"], level1["smallest"], level1["largest"]) == (3, 4, 5)
    assert p["levels"][-1]["groups"] == 1 and p["levels"][-1]["smallest"] == 13


def test_preview_of_each_builder_on_the_dataset(client, officer, dataset):
    client.force_login(officer)
    r = _preview(client, dataset, "age", {"builder": "interval", "width": 10, "bottom": 25})
    assert r.status_code == 200
    p = r.json()
    assert p["covered"] and p["levels"][0]["groups"] == 6
    assert "<25" in [g["label"] for g in p["levels"][1]["listed"]]  # 22 bottom-coded
    r = _preview(client, dataset, "zip", {"builder": "mask"}).json()
    assert r["levels"][2]["groups"] == 2  # 476**, 479**
    r = _preview(client, dataset, "sex", {"rows": [["F", "*"]]}).json()
    assert not r["covered"] and r["uncovered"] == [{"value": "M", "records": 3}]
    r = _preview(
        client,
        dataset,
        "disease",
        {"builder": "grouping", "group_size": 2, "order": ["flu", "cancer", "gastritis"]},
    ).json()
    level1 = [(g["label"], g["records"]) for g in r["levels"][1]["listed"]]
    assert level1 == [("flu-cancer", 4), ("gastritis", 2)]


def test_a_bad_spec_is_refused_with_every_reason(client, officer, dataset):
    client.force_login(officer)
    r = _preview(client, dataset, "age", {"builder": "interval", "width": -1, "fanout": 1})
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert any("'width'" in e for e in errors) and any("'fanout'" in e for e in errors)
    r = _preview(client, dataset, "age", {"builder": "interval"})
    assert r.status_code == 400 and "width" in r.json()["errors"][0]


def test_saving_from_the_wizard(client, officer, dataset):
    client.force_login(officer)
    url = reverse("datasets:hierarchy-wizard", args=[dataset.pk, "age"])
    page = client.get(url)
    assert page.status_code == 200 and b"wizard-data" in page.content
    r = client.post(url, {"spec": json.dumps({"builder": "interval", "width": 20})})
    assert r.status_code == 302
    stored = StoredHierarchy.objects.get(dataset=dataset, column="age", is_current=True)
    assert stored.spec == {"builder": "interval", "width": 20}
    r = client.post(url, {"spec": json.dumps({"rows": [["29", "*"]]})})
    assert r.status_code == 400 and "22" in r.content.decode()  # names an uncovered value
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert 'data-testid="build-hierarchy-age"' in page


def test_only_the_teams_officers(client, steward, outsider, dataset):
    url = reverse("datasets:hierarchy-wizard", args=[dataset.pk, "age"])
    preview = reverse("datasets:hierarchy-preview", args=[dataset.pk, "age"])
    client.force_login(steward)
    assert client.get(url).status_code == 403
    assert _preview(client, dataset, "age", {"builder": "mask"}).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    assert client.post(preview, "{}", content_type="application/json").status_code == 404


def test_unknown_column_is_404(client, officer, dataset):
    client.force_login(officer)
    assert (
        client.get(reverse("datasets:hierarchy-wizard", args=[dataset.pk, "nope"])).status_code
        == 404
    )
