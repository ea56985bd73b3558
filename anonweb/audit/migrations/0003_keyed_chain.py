"""Events are hashed with an HMAC keyed outside the database (scheme 3). Earlier events keep
their scheme and are verified as written; the first keyed event seals them, since its link to
them is covered by the key."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_canonical_chain")]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="scheme",
            field=models.PositiveSmallIntegerField(default=3),
        ),
    ]
