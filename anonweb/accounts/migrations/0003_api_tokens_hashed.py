"""API tokens are stored as the SHA-256 of their key. Existing tokens (Django REST framework's
table, keys in plain text) are moved over hashed, so scripts keep working, and their plain
keys are deleted."""

import hashlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def hash_existing(apps, schema_editor):
    ApiToken = apps.get_model("accounts", "ApiToken")
    Token = apps.get_model("authtoken", "Token")
    for token in Token.objects.all().iterator():
        ApiToken.objects.create(
            user_id=token.user_id,
            digest=hashlib.sha256(token.key.encode("utf-8")).hexdigest(),
        )
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_team_groups"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["-created", "-id"]},
        ),
        migrations.RunPython(hash_existing, migrations.RunPython.noop),
    ]
