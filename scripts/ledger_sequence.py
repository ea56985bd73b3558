"""The privacy ledger of one source after a scripted sequence, on a fresh SQLite database.

    .venv/bin/python scripts/ledger_sequence.py

A steward sets the budget (ε = 3, δ = 1e-5); an officer then runs two central DP releases, one
local-DP release, tries a launch that does not fit what remains (refused), and launches a job
that is cancelled while queued (refunded: nothing was drawn). Jobs run in this process exactly as
the worker runs them. The table is generated here (500 made-up patients), so nothing outside the
repository is read. Prints each step's outcome and the ledger's state after each of them.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHY = {"purpose": "ledger demonstration", "recipient": "the privacy team"}
sys.path.insert(0, str(ROOT))


def _setup(workdir: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'ledger.sqlite3'}"
    os.environ["ANONWEB_VAR_DIR"] = str(workdir / "var")
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(48))
    os.environ["DJANGO_SETTINGS_MODULE"] = "anonweb.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _table():
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(2024)
    n = 500
    return pd.DataFrame(
        {
            "pid": [f"P{i:04d}" for i in rng.integers(0, 420, n)],  # some people have 2+ rows
            "age": rng.integers(18, 91, n),
            "city": rng.choice(["Lyon", "Nantes", "Lille", "Metz", "Brest"], n),
            "disease": rng.choice(["flu", "gastritis", "cancer"], n, p=[0.5, 0.3, 0.2]),
        }
    )


def _print_ledger(ledger, title: str) -> None:
    print(f"\n-- ledger after: {title}")
    print(
        f"   budget ε = {ledger.epsilon:g}, δ = {ledger.delta:g} ({ledger.to_dict()['composition']}"
        " composition)"
    )
    print(
        f"   spent ε = {ledger.spent_epsilon:.4f}, δ = {ledger.spent_delta:.3g}; "
        f"reserved ε = {ledger.reserved_epsilon:.4f}, δ = {ledger.reserved_delta:.3g}; "
        f"remaining ε = {ledger.remaining:.4f}, δ = {ledger.remaining_delta:.3g}"
    )
    for e in ledger.entries:
        print(
            f"   job {e['job_id']:>2} {e['status']:<10} {e['state']:<9} ε = {e['epsilon']:.4f} "
            f"(central {e['central_epsilon']:.4f}, local {e['local_epsilon']:.4f}) "
            f"δ = {e['delta']:.3g}"
        )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        _setup(Path(tmp))
        import io

        from django.contrib.auth import get_user_model
        from django.core.files.uploadedfile import SimpleUploadedFile

        from anonweb.accounts.models import Membership, Role, Team
        from anonweb.core.errors import CoreError
        from anonweb.datasets.services import dataset_create, dataset_set_tags
        from anonweb.jobs.execution import job_execute
        from anonweb.jobs.services import anonymize_launch, job_cancel
        from anonweb.releases.budget import budget_set, ledger_for

        team = Team.objects.create(name="Clinic", slug="clinic")
        users = {}
        for role in (Role.PRIVACY_OFFICER, Role.DATA_STEWARD):
            users[role] = get_user_model().objects.create_user(username=str(role))
            Membership.objects.create(team=team, user=users[role], role=role)
        officer, steward = users[Role.PRIVACY_OFFICER], users[Role.DATA_STEWARD]
        buf = io.StringIO()
        _table().to_csv(buf, index=False)
        upload = SimpleUploadedFile("patients.csv", buf.getvalue().encode(), "text/csv")
        dataset = dataset_create(user=officer, team=team, upload=upload, name="patients")
        dataset = dataset_set_tags(
            user=officer,
            dataset=dataset,
            tags={"pid": "identifier", "age": "quasi_identifier", "disease": "sensitive"},
        )
        budget_set(user=steward, dataset=dataset, epsilon=3.0, delta=1e-5)
        print(f"source SHA-256 {dataset.source_sha256[:16]}…, budget ε = 3, δ = 1e-5")

        person = {"identifier": "pid", "max_contributions": 2}
        diseases = {"disease": ["flu", "gastritis", "cancer"]}
        plans = [
            (
                "central 1: DP histogram of disease (declared categories), ε = 1",
                [
                    (
                        "dp_release",
                        {
                            "kind": "histogram",
                            "epsilon": 1.0,
                            "columns": ["disease"],
                            "categories": diseases,
                            **person,
                        },
                    )
                ],
            ),
            (
                "central 2: DP counts of age over 10 public bins (ε = 0.5) and cities selected "
                "privately (ε = 0.5, δ ≤ 1e-6)",
                [
                    (
                        "dp_release",
                        {
                            "kind": "range",
                            "epsilon": 0.5,
                            "columns": ["age"],
                            "bounds": [0, 100],
                            "bins": 10,
                            **person,
                        },
                    ),
                    (
                        "dp_release",
                        {
                            "kind": "histogram",
                            "epsilon": 0.5,
                            "columns": ["city"],
                            "delta": 1e-6,
                            **person,
                        },
                    ),
                ],
            ),
            (
                "local DP: randomized response on disease, ε = 0.5 per record",
                [
                    ("drop", {"columns": ["pid"]}),
                    (
                        "ldp_randomized_response",
                        {"column": "disease", "epsilon": 0.5, "categories": diseases["disease"]},
                    ),
                ],
            ),
        ]

        def plan_of(steps):
            return {"version": 1, "steps": [{"kind": k, "params": p} for k, p in steps]}

        for title, steps in plans:
            job = anonymize_launch(
                user=officer, dataset=dataset, plan=plan_of(steps), title=title, **WHY
            )
            job_execute(job_id=job.pk, worker="script")
            job.refresh_from_db()
            print(
                f"\n{title}\n   job {job.pk}: {job.status}"
                + (f" ({job.error})" if job.error else "")
            )
            _print_ledger(ledger_for(dataset), title)

        title = "over budget: DP histogram of disease at ε = 1 (0.5 remains)"
        try:
            anonymize_launch(
                user=officer, dataset=dataset, plan=plan_of(plans[0][1]), title=title, **WHY
            )
            print(f"\n{title}\n   launched (unexpected)")
        except CoreError as exc:
            print(f"\n{title}\n   refused: {exc}")
        _print_ledger(ledger_for(dataset), title)

        title = "cancelled while queued: DP histogram at ε = 0.4"
        step = ("dp_release", {**plans[0][1][0][1], "epsilon": 0.4})
        job = anonymize_launch(
            user=officer, dataset=dataset, plan=plan_of([step]), title=title, **WHY
        )
        print(
            f"\n{title}\n   job {job.pk} queued: ε = 0.4 reserved "
            f"(remaining ε = {ledger_for(dataset).remaining:.4f})"
        )
        job_cancel(user=officer, job=job)
        job.refresh_from_db()
        print(f"   job {job.pk}: {job.status}; nothing was drawn, so the reservation is refunded")
        _print_ledger(ledger_for(dataset), "the cancelled job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
