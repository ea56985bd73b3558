"""Concurrent launches cannot overspend a privacy budget, on PostgreSQL (row lock) and on SQLite
(an immediate write transaction)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.db import connection

from anonweb.jobs.models import Job
from anonweb.releases.budget import budget_set, ledger_for
from tests.conftest import REQUIRE_SERVICES, ROOT, unavailable
from tests.services.budget_race import histogram_plan, launch_two_at_once
from tests.web.conftest import csv_upload
from tests.web.factories import Role, TeamFactory, member


def _check(results, jobs, spent):
    assert sorted(r == "launched" for r in results) == [False, True], results
    refused = next(r for r in results if r != "launched")
    assert "only ε = 0.4 of the budget ε = 1 remains" in refused
    assert jobs == 1
    assert spent == pytest.approx(0.6)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_launches_at_once_on_postgresql_one_is_refused(settings, tmp_path):
    if connection.vendor != "postgresql":
        unavailable("the suite is not running on PostgreSQL", required=REQUIRE_SERVICES)
    from anonweb.datasets.services import dataset_create

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory()
    officer = member(team, Role.PRIVACY_OFFICER)
    steward = member(team, Role.DATA_STEWARD)
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    results = launch_two_at_once(
        user=officer, dataset=dataset, plans=[histogram_plan(0.6), histogram_plan(0.6)]
    )
    _check(results, Job.objects.count(), ledger_for(dataset).spent)


@pytest.mark.slow
def test_two_launches_at_once_on_sqlite_one_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'race.sqlite3'}"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.services.budget_race", url, str(tmp_path / "var")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **{k: v for k, v in __import__("os").environ.items() if k != "DATABASE_URL"},
            "DJANGO_SETTINGS_MODULE": "anonweb.test_settings",
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "sqlite"
    _check(out["results"], out["jobs"], out["spent"])
