from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0005_recipients"),
    ]

    operations = [
        migrations.AddField(
            model_name="releasepolicy",
            name="max_attack_excess",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="releasepolicy",
            name="max_membership_auc",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
