import django.db.models.deletion
from django.db import migrations, models

CHARGED = ("queued", "running", "succeeded")


def ledgers_from_datasets(apps, schema_editor):
    """One ledger per (team, source): the smallest ε budget set on any of its datasets, and a
    charge for every job the old ledger counted (queued/running/succeeded, or failed after it
    started), so nothing spent before is forgotten."""
    Dataset = apps.get_model("datasets", "Dataset")
    Job = apps.get_model("jobs", "Job")
    Ledger = apps.get_model("releases", "PrivacyLedger")
    Charge = apps.get_model("releases", "PrivacyCharge")
    for ds in Dataset.objects.order_by("created_at", "id"):
        ledger, _ = Ledger.objects.get_or_create(team_id=ds.team_id, source_sha256=ds.source_sha256)
        if ds.epsilon_budget is not None and (
            ledger.epsilon is None or ds.epsilon_budget < ledger.epsilon
        ):
            ledger.epsilon = ds.epsilon_budget
            ledger.save(update_fields=["epsilon"])
        for job in Job.objects.filter(dataset_id=ds.pk, kind="anonymize"):
            cost = (job.params or {}).get("privacy_cost") or {}
            epsilon = float(cost.get("epsilon", 0.0)) + float(cost.get("local_epsilon", 0.0))
            delta = float(cost.get("delta", 0.0))
            if epsilon <= 0 and delta <= 0:
                continue
            counted = job.status in CHARGED or (
                job.status == "failed" and job.started_at is not None
            )
            if job.status == "cancelled" and job.started_at is not None:
                counted = True  # cancelled while running: it may have drawn its noise
            Charge.objects.create(
                ledger=ledger,
                job=job,
                dataset_id=ds.pk,
                epsilon=epsilon,
                delta=delta,
                cost={k: float(v) for k, v in cost.items()},
                state=("reserved" if job.status == "queued" else "spent")
                if counted
                else "refunded",
            )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("datasets", "0006_source_sha256"),
        ("jobs", "0001_initial"),
        ("releases", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="PrivacyLedger",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("source_sha256", models.CharField(max_length=64)),
                ("epsilon", models.FloatField(blank=True, null=True)),
                ("delta", models.FloatField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ledgers",
                        to="accounts.team",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="PrivacyCharge",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("epsilon", models.FloatField()),
                ("delta", models.FloatField(default=0.0)),
                ("cost", models.JSONField(default=dict)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("reserved", "Reserved (job not yet run)"),
                            ("spent", "Spent (the mechanisms ran)"),
                            ("refunded", "Refunded (nothing was drawn)"),
                        ],
                        db_index=True,
                        default="reserved",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("spent_at", models.DateTimeField(blank=True, null=True)),
                ("refunded_at", models.DateTimeField(blank=True, null=True)),
                (
                    "dataset",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="privacy_charges",
                        to="datasets.dataset",
                    ),
                ),
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="privacy_charge",
                        to="jobs.job",
                    ),
                ),
                (
                    "ledger",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="charges",
                        to="releases.privacyledger",
                    ),
                ),
            ],
            options={"ordering": ["created_at", "id"]},
        ),
        migrations.AddConstraint(
            model_name="privacyledger",
            constraint=models.UniqueConstraint(
                fields=("team", "source_sha256"), name="one_ledger_per_source_per_team"
            ),
        ),
        migrations.RunPython(ledgers_from_datasets, migrations.RunPython.noop),
    ]
