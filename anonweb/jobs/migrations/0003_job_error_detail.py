"""A failed job's message moves to ``error_detail`` (privacy officers only: it may quote the
source); ``error`` becomes a summary with no data in it. Messages stored before cannot be told
apart, so every earlier one is moved and replaced by a sentence that quotes nothing."""

from django.db import migrations, models

EARLIER = (
    "The job failed; its message was recorded before failures were summarised, so it is "
    "shown to privacy officers only."
)


def move_messages(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.exclude(error="").only("pk", "error").iterator():
        Job.objects.filter(pk=job.pk).update(error_detail=job.error, error=EARLIER)


def move_back(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.exclude(error_detail="").only("pk", "error_detail").iterator():
        Job.objects.filter(pk=job.pk).update(error=job.error_detail)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_parse_kind")]

    operations = [
        migrations.AddField(
            model_name="job", name="error_detail", field=models.TextField(blank=True)
        ),
        migrations.RunPython(move_messages, move_back),
    ]
