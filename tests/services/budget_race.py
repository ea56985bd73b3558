"""Two launches at once against one privacy budget: exactly one may fit.

``launch_two_at_once`` is used in-process on the suite's database (PostgreSQL in CI) and, through
``python -m tests.services.budget_race DATABASE_URL``, in a process of its own on a SQLite file, so
both backends' locking (row lock; ``BEGIN IMMEDIATE``) is exercised whatever the suite runs on.

The critical section (read the ledger, check, write the charge) is widened by holding the check
for ``hold`` seconds, so a launch that did not wait for the other's lock would read a ledger
without the other's charge and both would be accepted.
"""

from __future__ import annotations

import json
import sys
import threading
import time


def launch_two_at_once(*, user, dataset, plans: list[dict], hold: float = 0.6) -> list[str]:
    """Launch ``plans`` from two threads released together; each result is "launched" or the
    error message that refused it."""
    from django.db import connection

    import anonweb.releases.budget as budget
    from anonweb.jobs.services import anonymize_launch

    real_check = budget.check_budget

    def slow_check(*args, **kwargs):
        real_check(*args, **kwargs)
        time.sleep(hold)

    budget.check_budget = slow_check
    barrier = threading.Barrier(len(plans))
    results: list[str] = [""] * len(plans)

    def run(i: int) -> None:
        try:
            barrier.wait()
            anonymize_launch(
                user=user,
                dataset=dataset,
                plan=plans[i],
                title=f"race {i}",
                purpose="testing",
                recipient="test team",
            )
            results[i] = "launched"
        except Exception as exc:  # the refusal is the expected outcome for one of them
            results[i] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(plans))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        budget.check_budget = real_check
    return results


def histogram_plan(epsilon: float) -> dict:
    query = {
        "kind": "histogram",
        "epsilon": epsilon,
        "columns": ["disease"],
        "categories": {"disease": ["flu", "gastritis", "cancer"]},
    }
    return {"version": 1, "steps": [{"kind": "dp_release", "params": query}]}


def _standalone(database_url: str, var_dir: str) -> dict:
    """Set up a fresh database at ``database_url`` and race two launches on it."""
    import os

    os.environ["DATABASE_URL"] = database_url
    os.environ["ANONWEB_VAR_DIR"] = var_dir
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonweb.test_settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from anonweb.accounts.models import Membership, Role, Team
    from anonweb.datasets.services import dataset_create
    from anonweb.jobs.models import Job
    from anonweb.releases.budget import budget_set, ledger_for
    from tests.web.conftest import csv_upload

    team = Team.objects.create(name="Race", slug="race")
    users = {}
    for role in (Role.PRIVACY_OFFICER, Role.DATA_STEWARD):
        users[role] = get_user_model().objects.create_user(username=role)
        Membership.objects.create(team=team, user=users[role], role=role)
    dataset = dataset_create(
        user=users[Role.PRIVACY_OFFICER], team=team, upload=csv_upload(), name="patients"
    )
    budget_set(user=users[Role.DATA_STEWARD], dataset=dataset, epsilon=1.0)
    connection.close()
    results = launch_two_at_once(
        user=users[Role.PRIVACY_OFFICER],
        dataset=dataset,
        plans=[histogram_plan(0.6), histogram_plan(0.6)],
    )
    return {
        "vendor": connection.vendor,
        "results": results,
        "jobs": Job.objects.count(),
        "spent": ledger_for(dataset).spent,
    }


if __name__ == "__main__":
    print(json.dumps(_standalone(sys.argv[1], sys.argv[2])))
