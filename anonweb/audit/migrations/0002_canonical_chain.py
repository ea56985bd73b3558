"""Audit events hash what the database returns: details as stored canonical text, actor and team
ids that no deletion rewrites, and the team's name. Events written before keep scheme 1 and are
verified as they were hashed."""

import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def details_to_text(apps, schema_editor):
    AuditEvent = apps.get_model("audit", "AuditEvent")
    Team = apps.get_model("accounts", "Team")
    names = dict(Team.objects.values_list("id", "name"))
    for event in AuditEvent.objects.order_by("seq").iterator():
        AuditEvent.objects.filter(pk=event.pk).update(
            details_text=json.dumps(
                event.details, sort_keys=True, separators=(",", ":"), ensure_ascii=True
            ),
            team_name=names.get(event.team_id, ""),
        )


def text_to_details(apps, schema_editor):
    AuditEvent = apps.get_model("audit", "AuditEvent")
    for event in AuditEvent.objects.order_by("seq").iterator():
        AuditEvent.objects.filter(pk=event.pk).update(details=json.loads(event.details_text))


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("audit", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="scheme",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="scheme",
            field=models.PositiveSmallIntegerField(default=2),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="team_name",
            field=models.CharField(blank=True, max_length=120),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="details_text",
            field=models.TextField(default="{}"),
        ),
        migrations.RunPython(details_to_text, text_to_details),
        migrations.RemoveField(model_name="auditevent", name="details"),
        migrations.AlterField(
            model_name="auditevent",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="team",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="accounts.team",
            ),
        ),
    ]
