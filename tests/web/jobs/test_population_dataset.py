"""A search's population table in the web app: another dataset of the same team, named on the
search step (``"population_dataset": id``), checked when the plan is submitted, read by the job;
the release's report names the population used."""

import pandas as pd
import pytest

from anonweb.core.errors import PlanError
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobStatus
from anonweb.jobs.services import anonymize_launch
from tests.web.conftest import csv_upload, small_table

pytestmark = pytest.mark.django_db


def _people(officer, team, df=None, name="people"):
    """The population: the six patients, each twice (so every patient's class holds half its
    people), uploaded as a dataset of the team."""
    from anonweb.datasets.services import dataset_create

    table = small_table()
    df = pd.concat([table, table], ignore_index=True) if df is None else df
    return dataset_create(user=officer, team=team, upload=csv_upload(df, f"{name}.csv"), name=name)


def _plan(models, population=None):
    params = {"k": 1, "suppression": 0.0, "models": models}
    if population is not None:
        params["population_dataset"] = population
    return {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 10},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "zip"]}},
            {"kind": "optimal_generalization", "params": params},
        ],
    }


def _launch(officer, dataset, plan):
    return anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="t", purpose="testing", recipient="us"
    )


def test_the_search_reads_the_teams_population_dataset(officer, team, dataset):
    people = _people(officer, team)
    plan = _plan(
        [{"model": "k_map", "k": 2}, {"model": "delta_presence", "min": 0.0, "max": 0.5}],
        population=people.pk,
    )
    job = _launch(officer, dataset, plan)
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    report = job.release.report
    step = next(s for s in report["steps"] if s["kind"] == "optimal_generalization")
    # each patient is 2 of the population's people: 2-map and δ = 1/2 hold ungeneralized
    assert step["levels"] == {"age": 0, "sex": 0}
    assert step["population"] == {"name": "people", "rows": 12}
    checks = {c["model"]["model"]: c for c in step["model_checks"]}
    assert checks["k_map"]["value"] == 2 and checks["k_map"]["satisfied"]
    assert checks["delta_presence"]["value"] == 0.5 and checks["delta_presence"]["satisfied"]
    assert report["risk_after"]["population_table"] == {"name": "people", "rows": 12}


def test_another_teams_dataset_is_never_a_population(officer, outsider, other_team, dataset):
    theirs = _people(outsider, other_team, name="theirs")
    plan = _plan([{"model": "k_map", "k": 2}], population=theirs.pk)
    with pytest.raises(PlanError, match="no such dataset in this team"):
        _launch(officer, dataset, plan)
    # the same words as for a dataset that does not exist: nothing is learnt of other teams
    with pytest.raises(PlanError, match=f"population dataset {theirs.pk + 1000}: no such"):
        _launch(officer, dataset, _plan([{"model": "k_map", "k": 2}], population=theirs.pk + 1000))


def test_a_population_without_the_quasi_identifiers_is_refused(officer, team, dataset):
    people = _people(officer, team, df=small_table().drop(columns=["sex"]), name="ages")
    with pytest.raises(PlanError, match="lacks the quasi-identifier"):
        _launch(officer, dataset, _plan([{"model": "k_map", "k": 2}], population=people.pk))


def test_a_population_model_without_a_population_is_refused(officer, dataset):
    with pytest.raises(PlanError, match="needs a population"):
        _launch(officer, dataset, _plan([{"model": "delta_presence", "min": 0.0, "max": 0.5}]))
    with pytest.raises(PlanError, match="needs a population"):
        _launch(officer, dataset, _plan([{"model": "k_map", "k": 2}]))
    # k-map with a population size is estimated, as before: no population dataset needed
    job = _launch(officer, dataset, _plan([{"model": "k_map", "k": 2, "population_size": 100}]))
    assert job.pk
