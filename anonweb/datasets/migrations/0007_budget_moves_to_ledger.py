from django.db import migrations


class Migration(migrations.Migration):
    """The ε budget now lives in the source's ledger (releases.PrivacyLedger), with δ."""

    dependencies = [
        ("datasets", "0006_source_sha256"),
        ("releases", "0002_privacy_ledger"),
    ]

    operations = [migrations.RemoveField(model_name="dataset", name="epsilon_budget")]
