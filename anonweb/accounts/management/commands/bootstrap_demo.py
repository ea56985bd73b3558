"""Create a demo team, one user per role and a demo dataset. Safe to run again: it reuses
what exists and never changes an existing user's password."""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand, CommandError

from anonweb.accounts.models import Role, Team
from anonweb.accounts.services import membership_grant
from anonweb.datasets.models import Dataset
from anonweb.datasets.services import dataset_create, dataset_set_hierarchy, dataset_set_tags
from anonweb.demo.pii import add_synthetic_pii

DEMO_USERS = [
    ("officer", Role.PRIVACY_OFFICER, "Olivia", "Officer"),
    ("steward", Role.DATA_STEWARD, "Sam", "Steward"),
    ("analyst", Role.ANALYST, "Ana", "Analyst"),
]
DEMO_DATASET = "Adult census extract with PII (demo)"
DEMO_QIS = [
    "age",
    "sex",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "salary-class",
]


class Command(BaseCommand):
    help = "Create demo users (one per role, plus an admin) and load the demo dataset."

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-dataset", action="store_true", help="only create the team and users"
        )

    def handle(self, *args, **options):
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        creds = []
        for username, role, first, last in DEMO_USERS:
            creds.append(self._user(team, username, role, first, last))
        creds.append(self._admin())
        self._save_credentials([c for c in creds if c[1]])
        self.stdout.write("Demo accounts (user name, then password):")
        for username, password, label in creds:
            shown = (
                password
                or "(unchanged; see var/demo-credentials.txt or set it again with changepassword)"
            )
            self.stdout.write(f"  {label:<16} {username:<9} {shown}")
        if not options["no_dataset"]:
            self._dataset(team)

    def _password(self, username: str) -> str:
        variable = f"ANONWEB_DEMO_PASSWORD_{username.upper()}"
        chosen = os.environ.get(variable)
        if not chosen:
            return secrets.token_urlsafe(12)
        # A chosen password meets the same rules as one set through the site.
        try:
            validate_password(chosen, user=get_user_model()(username=username))
        except ValidationError as exc:
            raise CommandError(f"{variable} is refused: {' '.join(exc.messages)}") from None
        return chosen

    def _user(self, team, username, role, first, last):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        password = None
        if user is None:
            password = self._password(username)
            user = User.objects.create_user(
                username=username, password=password, first_name=first, last_name=last
            )
        membership_grant(actor=None, team=team, user=user, role=role, via="bootstrap_demo")
        return (username, password, Role(role).label)

    def _admin(self):
        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            return ("admin", None, "Administrator")
        password = self._password("admin")
        User.objects.create_superuser(username="admin", password=password, email="")
        return ("admin", password, "Administrator")

    def _save_credentials(self, creds):
        """Keep the newest password of each demo user in var/ (mode 600) for the next run."""
        path = Path(settings.VAR_DIR) / "demo-credentials.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        known = (
            dict(line.split(" ", 1) for line in path.read_text().splitlines() if " " in line)
            if path.exists()
            else {}
        )
        known.update({u: p for u, p, _ in creds})
        path.write_text("".join(f"{u} {p}\n" for u, p in known.items()))
        os.chmod(path, 0o600)

    def _dataset(self, team):
        if Dataset.objects.filter(team=team, name=DEMO_DATASET).exists():
            self.stdout.write(f"Demo dataset already loaded: {DEMO_DATASET}")
            return
        import pandas as pd

        src = Path(__file__).resolve().parents[3] / "demo" / "adult_subset.csv"
        df = add_synthetic_pii(pd.read_csv(src, sep=";"))
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        officer = get_user_model().objects.get(username="officer")
        upload = SimpleUploadedFile(
            "adult_with_pii.csv", buf.getvalue().encode(), content_type="text/csv"
        )
        dataset = dataset_create(
            user=officer,
            team=team,
            upload=upload,
            name=DEMO_DATASET,
            description="Adult census rows with synthetic names, SSNs, birth dates and ZIP codes.",
        )
        tags = {
            "name": "identifier",
            "ssn": "identifier",
            "birth_date": "quasi_identifier",
            "zip": "quasi_identifier",
            "occupation": "sensitive",
            **{c: "quasi_identifier" for c in DEMO_QIS},
        }
        dataset_set_tags(user=officer, dataset=dataset, tags=tags)

        for column in DEMO_QIS:
            path = src.parent / "hierarchies" / f"{column}.csv"
            with open(path, "rb") as fh:
                dataset_set_hierarchy(
                    user=officer,
                    dataset=dataset,
                    column=column,
                    upload=SimpleUploadedFile(path.name, fh.read()),
                )
        self.stdout.write(f"Loaded demo dataset: {DEMO_DATASET} ({dataset.rows} rows)")
