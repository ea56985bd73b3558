from django.db import migrations, models


def models_from_columns(apps, schema_editor):
    """A policy's k, l and t as its list of model specs (what the gate reads now)."""
    ReleasePolicy = apps.get_model("releases", "ReleasePolicy")
    for row in ReleasePolicy.objects.all():
        specs = [{"model": "k_anonymity", "k": row.k}, {"model": "distinct_l", "l": row.l}]
        if row.t is not None:
            specs.append({"model": "t_closeness", "t": row.t})
        row.model_specs = specs
        row.save(update_fields=["model_specs"])


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0006_release_policy_attack_caps"),
    ]

    operations = [
        migrations.AddField(
            model_name="releasepolicy",
            name="model_specs",
            field=models.JSONField(blank=True, default=list),
        ),
        # the columns stay, kept in step: reversing leaves them as they were
        migrations.RunPython(models_from_columns, migrations.RunPython.noop),
    ]
