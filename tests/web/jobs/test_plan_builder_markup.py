"""The plan page's builder data is written with the schemas' JSON serialised once per process:
the markup is exactly what ``json_script(builder_data(dataset), "builder-data")`` writes, for
a dataset whose names need escaping in a script element too."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import json_script

from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.jobs.plan_views import builder_data, builder_markup
from tests.web.conftest import csv_upload, small_table

pytestmark = pytest.mark.django_db


@pytest.fixture
def awkward(officer, team):
    df = small_table().assign(
        **{"</script><b>&": ["Genève", "Zürich", "Genève", "Zürich", "Bâle", "Bâle"]}
    )
    ds = dataset_create(user=officer, team=team, upload=csv_upload(df), name="villes")
    return dataset_set_tags(
        user=officer, dataset=ds, tags={"</script><b>&": "quasi_identifier", "age": "sensitive"}
    )


def test_the_markup_is_json_script_of_the_builder_data(awkward, dataset):
    for ds in (awkward, dataset):
        assert str(builder_markup(ds)) == str(json_script(builder_data(ds), "builder-data"))


def test_the_page_carries_it_and_it_reads_back(client, officer, awkward):
    client.force_login(officer)
    page = client.get(reverse("jobs:plan", args=[awkward.pk])).content.decode()
    start = page.index('<script id="builder-data" type="application/json">')
    body = page[start:].split(">", 1)[1].split("</script>", 1)[0]
    assert "</script><b>" not in body
    data = json.loads(body)
    assert data == json.loads(json.dumps(builder_data(awkward)))
    assert {c["name"]: c["tag"] for c in data["columns"]}["</script><b>&"] == "quasi_identifier"
    assert "generalize" in data["schemas"]["steps"]
