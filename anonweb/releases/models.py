"""Immutable, versioned releases. Content never changes after creation; only the review
state moves, and only forward (pending -> approved | rejected)."""

import uuid

from django.conf import settings
from django.db import models


class ReleaseStatus(models.TextChoices):
    PENDING = "pending", "Awaiting approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class Release(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="releases")
    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.PROTECT, related_name="releases"
    )
    job = models.OneToOneField(
        "jobs.Job", null=True, on_delete=models.SET_NULL, related_name="release"
    )
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, default="table")
    storage_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    plan = models.JSONField(default=dict)  # public parameters only: never keys or seeds
    report = models.JSONField(default=dict)
    rows = models.BigIntegerField(default=0)
    columns = models.JSONField(default=list)
    sha256 = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=ReleaseStatus.choices, default=ReleaseStatus.PENDING, db_index=True
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    # Ids of the earlier releases this one was checked against when it was made (None: never
    # checked, as for a differentially private release).
    conflicts_checked = models.JSONField(null=True, blank=True)
    # Why the data goes out and to whom (purpose limitation): stated at launch, shown to the
    # steward beside the findings and to analysts where they download.
    purpose = models.TextField(blank=True)
    recipient = models.CharField(max_length=200, blank=True)
    # Who receives it, as the launch named them ("USERNAME", "group:NAME"); none: every analyst
    # of the team. The names are the record; the two relations below are what access reads
    # (anonweb.releases.selectors), a group's members while they are analysts of the team.
    recipients = models.JSONField(default=list, blank=True)
    recipient_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="received_releases"
    )
    recipient_groups = models.ManyToManyField(
        "accounts.TeamGroup", blank=True, related_name="received_releases"
    )
    # The release gate's verdict when the job finished (anonweb.core.release.policy):
    # {"findings": [...], "blocking": n, "thresholds": {...}, "risk": {...}}; counts, no values.
    gate = models.JSONField(default=dict, blank=True)
    # What analysts see: only what the released data shows and the plan's public parameters.
    published_report = models.JSONField(default=dict, blank=True)
    # A steward's approval over blocking findings: {"justification", "findings", "by", "at"}.
    override = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "version"], name="unique_release_version"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.version}: {self.title}"

    @property
    def findings(self) -> list[dict]:
        """The gate's findings as recorded when the release was written. What an approval is
        decided on is :func:`anonweb.releases.gate.release_gate_now` (conflicts checked again
        against the live releases, later ones included)."""
        return list((self.gate or {}).get("findings") or [])

    @property
    def blocking_findings(self) -> list[dict]:
        return [f for f in self.findings if f.get("severity") == "block"]


class ReleaseLink(models.Model):
    """A single-use download link a data steward issues for an approved release, for a
    recipient outside the team. Only the SHA-256 of its random token is stored; the link gives
    the file in ``format`` once, before ``expires_at``, and nothing else about the release."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="links")
    token_sha256 = models.CharField(max_length=64, unique=True)
    format = models.CharField(max_length=16)
    label = models.CharField(max_length=200)  # whom it is for, as the steward wrote it
    expires_at = models.DateTimeField()
    issued_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    issued_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-issued_at", "-id"]

    def __str__(self) -> str:
        return f"link {self.pk} to release {self.release_id} for {self.label}"


class ReleasePolicy(models.Model):
    """A team's release policy: the thresholds the risk after must meet (a data steward edits
    them). Without a row the defaults of anonweb.core.release.policy.PolicyThresholds apply."""

    team = models.OneToOneField(
        "accounts.Team", on_delete=models.CASCADE, related_name="release_policy"
    )
    k = models.PositiveIntegerField(default=5)
    l = models.PositiveIntegerField(default=2)  # noqa: E741
    t = models.FloatField(null=True, blank=True)
    max_prosecutor_risk = models.FloatField(default=0.2)
    # caps on the attack figures; null: not checked
    max_attack_excess = models.FloatField(null=True, blank=True)
    max_membership_auc = models.FloatField(null=True, blank=True)
    # the policy's privacy models as a plan's "models" entries ([{"model": "k_anonymity",
    # "k": 5}, ...]; a spec without "sensitive" applies to every sensitive column). Empty in a
    # row written before it: k, l and t above are the policy then; they are kept in step.
    model_specs = models.JSONField(default=list, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"release policy of {self.team}"


class PrivacyLedger(models.Model):
    """The differential-privacy budget of one source: every dataset of the team whose raw file has
    this SHA-256 (an identical re-upload, or the same file kept after a purge) draws on it.

    A data steward sets ``epsilon`` and ``delta``; ``None`` means no DP release may run (for δ: none
    that spends δ > 0). What was spent is the sum of the charges that are not refunded."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="ledgers")
    source_sha256 = models.CharField(max_length=64)
    epsilon = models.FloatField(null=True, blank=True)
    delta = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "source_sha256"], name="one_ledger_per_source_per_team"
            )
        ]

    def __str__(self) -> str:
        return f"ledger {self.source_sha256[:12]}… ({self.team})"


class ChargeState(models.TextChoices):
    RESERVED = "reserved", "Reserved (job not yet run)"
    SPENT = "spent", "Spent (the mechanisms ran)"
    REFUNDED = "refunded", "Refunded (nothing was drawn)"


class PrivacyCharge(models.Model):
    """What one anonymize job costs its source's ledger. Reserved when the job is queued, spent
    just before its first privacy-spending step touches the data, refunded only if the job ends
    before that (cancelled while queued, failed before running the plan)."""

    ledger = models.ForeignKey(PrivacyLedger, on_delete=models.CASCADE, related_name="charges")
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="privacy_charge")
    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.CASCADE, related_name="privacy_charges"
    )
    # Charged totals: central ε plus local ε (basic composition), and δ.
    epsilon = models.FloatField()
    delta = models.FloatField(default=0.0)
    # {"epsilon": central, "local_epsilon": ..., "delta": ...} as the plan's privacy maps gave them.
    cost = models.JSONField(default=dict)
    state = models.CharField(
        max_length=16, choices=ChargeState.choices, default=ChargeState.RESERVED, db_index=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    spent_at = models.DateTimeField(null=True, blank=True)
    refunded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"charge ε={self.epsilon:g} δ={self.delta:g} ({self.state}) for job {self.job_id}"


class ConflictFinding(models.Model):
    """What a release discloses together with earlier releases of the same source, found by the
    check run when it was made. Holds counts, columns and a plain explanation without figures;
    the records concerned and the values an attacker would infer stay in the release's private
    files (privacy officers only)."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="conflict_findings")
    involved = models.ManyToManyField(Release, related_name="conflicts_involving")
    position = models.PositiveIntegerField()  # index in the private findings file
    type = models.CharField(max_length=32)
    records = models.PositiveIntegerField()
    columns = models.JSONField(default=list)
    labels = models.JSONField(default=dict)  # release label in the text -> release id
    explanation = models.TextField()
    facts = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["release_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "position"], name="unique_conflict_finding_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} ({self.records} records) found by release {self.release_id}"
