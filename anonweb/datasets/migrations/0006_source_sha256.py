from django.db import migrations, models


class Migration(migrations.Migration):
    """The raw file's digest recognises the source (the privacy budget ledger is keyed on it)."""

    dependencies = [("datasets", "0005_population_size")]

    operations = [
        migrations.RenameField(model_name="dataset", old_name="sha256", new_name="source_sha256"),
        migrations.AlterField(
            model_name="dataset",
            name="source_sha256",
            field=models.CharField(db_index=True, max_length=64),
        ),
    ]
