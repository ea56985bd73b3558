"""Workers on another host share the files through the bucket: a real Celery worker whose
local disk is not the web process's (its own ANONWEB_VAR_DIR) reads the upload from the S3 API,
writes the Parquet copy and the release there, and the web process serves the download from
it. The S3 API is moto's server on 127.0.0.1 (tests/web/common/test_object_storage.py)."""

from __future__ import annotations

import hashlib
import io

import pytest

from anonweb.accounts.models import Role
from anonweb.audit.models import AuditEvent
from anonweb.releases.models import Release
from tests.services.test_api_flow import finished_job, table, token_client
from tests.web.common.test_object_storage import (  # the bucket's fixtures and credentials
    KEY_ID,
    REGION,
    SECRET,
    _keys,
    s3,  # noqa: F401
    s3_endpoint,  # noqa: F401
)
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.services]


def test_a_worker_on_another_disk_works_from_the_shared_bucket(
    broker,
    start_worker,
    redis_url,
    s3,  # noqa: F811
    s3_endpoint,  # noqa: F811
    tmp_path,
    settings,
):
    _, bucket = s3
    other_host = tmp_path / "other-host"
    start_worker(
        {
            **broker(redis_url, {"socket_connect_timeout": 3}),
            "ANONWEB_VAR_DIR": str(other_host),
            "ANONWEB_STORAGE": "s3",
            "AWS_STORAGE_BUCKET_NAME": bucket,
            "AWS_S3_ENDPOINT_URL": s3_endpoint,
            "AWS_S3_REGION_NAME": REGION,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
        }
    )
    team = TeamFactory(name="Registry", slug="registry")
    officer = token_client(member(team, Role.PRIVACY_OFFICER, username="s3-officer"))
    steward = token_client(member(team, Role.DATA_STEWARD, username="s3-steward"))
    analyst = token_client(member(team, Role.ANALYST, username="s3-analyst"))

    source = table(200)
    upload = io.BytesIO(source.to_csv(index=False).encode())
    upload.name = "registry.csv"
    response = officer.post(
        "/api/v1/datasets/", {"file": upload, "name": "registry"}, format="multipart"
    )
    assert response.status_code == 202, response.content
    dataset_id = response.json()["id"]
    finished_job(officer, response.json()["job"])
    roles = {"name": "identifier", "age": "quasi_identifier", "sex": "quasi_identifier"}
    assert (
        officer.patch(
            f"/api/v1/datasets/{dataset_id}/", {"roles": roles}, format="json"
        ).status_code
        == 200
    )
    plan = {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "hierarchies": {"age": {"builder": "interval", "width": 10}},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "zip", "disease"]}},
            {"kind": "generalize", "params": {"levels": {"age": 3}}},
        ],
    }
    response = officer.post(
        f"/api/v1/datasets/{dataset_id}/releases/",
        {
            "title": "shared",
            "purpose": "registry statistics",
            "recipient": "analysts",
            "plan": plan,
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    release_id = finished_job(officer, response.json()["job"])["release"]
    response = steward.post(
        f"/api/v1/releases/{release_id}/review/",
        {"decision": "approve", "note": "shared bucket", "override": "checked by hand"},
        format="json",
    )
    assert response.status_code == 200, response.content

    response = analyst.get(f"/api/v1/releases/{release_id}/download/?format=csv")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    release = Release.objects.get(pk=release_id)
    assert hashlib.sha256(body).hexdigest() == release.sha256
    assert f"releases/{release.storage_key}/data.csv" in _keys(s3, "releases/")
    # The worker kept nothing of the dataset or the release on its own disk.
    kept = [p for p in (other_host / "media").rglob("*") if p.is_file()]
    assert kept == []
    event = AuditEvent.objects.get(action="release.created", target_id=str(release_id))
    assert all(o["version"] for o in event.details["objects"]), "the bucket's versions recorded"
