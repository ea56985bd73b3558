from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0006_attack_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="kind",
            field=models.CharField(
                choices=[
                    ("parse", "Read the uploaded file"),
                    ("profile", "Profile and risk assessment"),
                    ("anonymize", "Anonymize (release plan)"),
                    ("demo_sleep", "Queue check (waits a few seconds)"),
                    ("hierarchy", "Read an uploaded hierarchy"),
                    ("attack", "Attack a release again"),
                    ("utility", "Measure a release's utility"),
                ],
                max_length=32,
            ),
        ),
    ]
