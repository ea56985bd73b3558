"""Files in object storage: with ANONWEB_STORAGE=s3 an upload, its Parquet copy and a release
live in the bucket (nothing on the local disk), a release object is written once, and
audit_verify holds each published object's SHA-256 and version.

The bucket is served by moto's server over HTTP on 127.0.0.1 (a real S3 API: botocore signs
and sends requests, pyarrow reads Parquet with ranged GETs), with versioning and object lock
enabled as a deployment's bucket would have them. The local backend's write-once and hash
checks are tested here too."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import TestCase
from django.urls import reverse
from moto.server import ThreadedMotoServer

from anonweb.audit.models import AuditEvent
from anonweb.common.files import ObjectExists, files
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.datasets.models import Dataset
from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.datasets.storage import load_distinct, load_frame, load_head
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.retention import dataset_purge
from anonweb.releases.services import release_review
from anonweb.releases.storage import (
    SOURCE_ROWS_PARQUET,
    load_lineage,
    read_private_json,
    release_object,
    release_prefix,
    remove_release_files,
    write_release_objects,
)
from anonweb.releases.storage_sweep import LEFTOVER_AGE, sweep_storage
from tests.web.conftest import csv_upload
from tests.web.releases.test_published_report import OVERRIDE, launch

pytestmark = pytest.mark.django_db

KEY_ID, SECRET, REGION = "anonweb-test", "anonweb-test-secret", "eu-west-1"
PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {"age": {"builder": "interval", "width": 10}},
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 3}}},
    ],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint():
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    # one line per request would bury a failure's own log
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(settings, s3_endpoint):
    """The application's storage pointed at a fresh bucket (object lock on, so versioned);
    returns a boto3 client and the bucket's name for looking at it from outside."""
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        region_name=REGION,
    )
    bucket = f"anonweb-{uuid.uuid4().hex[:20]}"
    client.create_bucket(
        Bucket=bucket,
        CreateBucketConfiguration={"LocationConstraint": REGION},
        ObjectLockEnabledForBucket=True,
    )
    settings.STORAGES = {
        **settings.STORAGES,
        "anonweb": {
            "BACKEND": "anonweb.common.s3files.S3Files",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": s3_endpoint,
                "region_name": REGION,
                "access_key": KEY_ID,
                "secret_key": SECRET,
                "default_acl": None,
                "file_overwrite": True,
            },
        },
    }
    settings.ANONWEB_S3_RELEASE_RETENTION_DAYS = 1
    return client, bucket


def _keys(s3, prefix: str = "") -> list[str]:
    client, bucket = s3
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in found.get("Contents", []))


def _versions(s3, prefix: str) -> list[str]:
    client, bucket = s3
    found = client.list_object_versions(Bucket=bucket, Prefix=prefix)
    return [v["Key"] for v in found.get("Versions", []) + found.get("DeleteMarkers", [])]


@pytest.fixture
def s3_dataset(s3, officer, team):
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    return dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "disease": "sensitive",
        },
    )


def test_an_upload_and_its_parquet_copy_live_in_the_bucket(s3, s3_dataset, settings):
    key = s3_dataset.storage_key
    assert _keys(s3, "datasets/") == [
        f"datasets/{key}/data.parquet",
        f"datasets/{key}/original.csv",
    ]
    assert not (settings.MEDIA_ROOT / "datasets").exists(), "nothing of it on the local disk"
    client, bucket = s3
    original = client.get_object(Bucket=bucket, Key=f"datasets/{key}/original.csv")["Body"].read()
    assert hashlib.sha256(original).hexdigest() == s3_dataset.source_sha256
    # Parquet reads of some columns go to the bucket through pyarrow's S3 file system.
    frame = load_frame(key, columns=["age", "disease"])
    assert list(frame.columns) == ["age", "disease"] and frame["age"].tolist()[:2] == [29, 22]
    assert sorted(load_distinct(key, "sex")) == ["F", "M"]
    assert len(load_head(key, 2)) == 2


def test_the_upload_page_stores_into_the_bucket_and_the_parse_job_reads_from_it(
    s3, client, officer, team, settings
):
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "visits", "file": csv_upload()}
    )
    assert response.status_code == 302
    dataset = Dataset.objects.get(name="visits")
    assert _keys(s3, "datasets/") == [f"datasets/{dataset.storage_key}/original.csv"]
    (job,) = Job.objects.filter(kind=JobKind.PARSE)
    with TestCase.captureOnCommitCallbacks(execute=True):
        job_execute(job_id=job.pk, worker="elsewhere")
    job.refresh_from_db()
    dataset.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert dataset.status == "ready" and dataset.rows == 6
    assert f"datasets/{dataset.storage_key}/data.parquet" in _keys(s3, "datasets/")
    incoming = settings.MEDIA_ROOT / "incoming"
    assert not [p for p in incoming.rglob("*") if p.is_file()], "no local copy is left"


def test_a_release_job_runs_on_the_bucket_and_is_downloaded_from_it(
    s3, s3_dataset, officer, steward, analyst, client, settings
):
    release = launch(officer, s3_dataset, PLAN, "k on s3")
    prefix = release_prefix(release.storage_key)
    assert {f"{prefix}/data.csv", f"{prefix}/data.parquet"} <= set(_keys(s3, prefix))
    assert not list((settings.MEDIA_ROOT / "releases").glob("*-*")), "no local release files"
    release_review(user=steward, release=release, decision="approve", override=OVERRIDE)

    client.force_login(analyst)
    response = client.get(reverse("releases:download", args=[release.pk]))
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert hashlib.sha256(body).hexdigest() == release.sha256
    assert body.splitlines()[0] == b"age,sex,disease"

    event = AuditEvent.objects.get(action="release.created", target_id=str(release.pk))
    recorded = {o["name"]: o for o in event.details["objects"]}
    c, bucket = s3
    for name in ("data.csv", "data.parquet"):
        head = c.head_object(Bucket=bucket, Key=f"{prefix}/{name}")
        assert recorded[name]["version"] == head["VersionId"]
        assert head["ObjectLockMode"] == "GOVERNANCE", "a release object is under retention"
    assert recorded["data.csv"]["sha256"] == release.sha256


def test_a_second_write_of_a_release_object_is_refused(s3, s3_dataset, officer):
    release = launch(officer, s3_dataset, PLAN, "k once")
    c, bucket = s3
    csv_key = release_object(release.storage_key, "data.csv")
    before = c.head_object(Bucket=bucket, Key=csv_key)["VersionId"]

    with pytest.raises(ObjectExists):
        write_release_objects(release.storage_key, pd.DataFrame({"age": ["forged"]}))
    with pytest.raises(ObjectExists):
        files().put(csv_key, b"age\nforged\n", once=True)

    assert c.head_object(Bucket=bucket, Key=csv_key)["VersionId"] == before
    stored = c.get_object(Bucket=bucket, Key=csv_key)["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == release.sha256
    assert len(_versions(s3, csv_key)) == 1, "no second version was written"


def test_audit_verify_holds_the_stored_objects_hash(s3, s3_dataset, officer, capsys):
    release = launch(officer, s3_dataset, PLAN, "k verified")
    call_command("audit_verify")
    assert "release objects intact: 2 objects of 1 releases" in capsys.readouterr().out

    # Someone with the bucket's credentials replaces the CSV (a plain PUT, no condition).
    c, bucket = s3
    key = release_object(release.storage_key, "data.csv")
    c.put_object(Bucket=bucket, Key=key, Body=b"age,sex,disease\n20-29,F,none\n")
    with pytest.raises(CommandError) as exc:
        call_command("audit_verify")
    message = str(exc.value)
    assert f"release #{release.pk} data.csv" in message and "it was changed" in message


def test_a_purge_removes_every_version_of_the_raw_data(
    s3, s3_dataset, officer, django_capture_on_commit_callbacks
):
    key = s3_dataset.storage_key
    release = launch(officer, s3_dataset, PLAN, "k kept")
    assert len(_versions(s3, f"datasets/{key}/")) == 2
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=s3_dataset, reason="the retention period ended")
    assert _versions(s3, f"datasets/{key}/") == [], "no old version of the raw data lingers"
    assert _keys(s3, release_prefix(release.storage_key)), "its releases remain"


def test_row_less_folders_in_the_bucket_are_swept_once_old(s3, s3_dataset, officer):
    release = launch(officer, s3_dataset, PLAN, "k live")
    orphan = release_prefix(uuid.uuid4())
    files().put(f"{orphan}/data.csv", b"age\n20-29\n", once=True)
    assert sweep_storage() == [], "a write that may still be under way is left alone"
    later = time.time() + LEFTOVER_AGE.total_seconds() + 60
    assert sweep_storage(now=later) == [orphan]
    assert _versions(s3, f"{orphan}/") == []
    assert _keys(s3, release_prefix(release.storage_key)), "a release's own objects stay"
    assert _keys(s3, f"datasets/{s3_dataset.storage_key}/"), "a dataset's own objects stay"


def test_an_engine_releases_lineage_is_stored_read_and_removed_with_it(s3, tmp_path):
    # An engine writes the release and, beside it, the source row of each of its rows: both go
    # into the bucket through the storage, a later release in memory reads the lineage back
    # (a bucket is read, not named as a local file), and removing the release removes it.
    key = uuid.uuid4()
    written = tmp_path / "release.parquet"
    pd.DataFrame({"age": ["20-29", "30-39", "20-29"]}).to_parquet(written, index=False)
    lineage = tmp_path / "release.lineage.parquet"
    pq.write_table(pa.table({LINEAGE_COLUMN: pa.array([2, 0, 1], pa.int64())}), lineage)
    write_release_objects(key, written, lineage_file=lineage)
    stored = release_object(key, f"private/{SOURCE_ROWS_PARQUET}")
    assert stored in _keys(s3, release_prefix(key))
    for in_memory in (True, False):
        read = load_lineage(key, label="release 1", in_memory=in_memory)
        assert read.rows.tolist() == [2, 0, 1] and read.rows_file is None
        assert read.table_file is None and read.frame["age"].tolist() == ["20-29", "30-39", "20-29"]
    assert read_private_json(key, "lineage.json")["record_level"]
    remove_release_files(key)
    assert _versions(s3, f"{release_prefix(key)}/") == []


# The local backend keeps the same promises.


def test_a_local_release_object_is_written_once(officer, dataset, settings):
    release = launch(officer, dataset, PLAN, "k local")
    path = settings.MEDIA_ROOT / "releases" / str(release.storage_key) / "data.csv"
    before = path.read_bytes()
    with pytest.raises(ObjectExists):
        write_release_objects(release.storage_key, pd.DataFrame({"age": ["forged"]}))
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def test_audit_verify_finds_a_local_release_file_changed(officer, dataset, settings, capsys):
    release = launch(officer, dataset, PLAN, "k local verified")
    call_command("audit_verify")
    assert "release objects intact: 2 objects" in capsys.readouterr().out
    path = settings.MEDIA_ROOT / "releases" / str(release.storage_key) / "data.parquet"
    path.write_bytes(path.read_bytes() + b"\n")
    with pytest.raises(CommandError) as exc:
        call_command("audit_verify")
    assert f"release #{release.pk} data.parquet" in str(exc.value)
    call_command("audit_verify", "--skip-objects")


def _settings_in_a_fresh_process(tmp_path, **variables) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANONWEB_S"))}
    env.update({"DEBUG": "1", "ANONWEB_VAR_DIR": str(tmp_path), **variables})
    script = "import json; from anonweb import settings as s; print(json.dumps(s.STORAGES))"
    root = Path(__file__).resolve().parents[3]
    return subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )


def test_the_storage_is_chosen_and_configured_from_the_environment(tmp_path):
    local = _settings_in_a_fresh_process(tmp_path)
    assert json.loads(local.stdout)["anonweb"]["BACKEND"] == "anonweb.common.files.LocalFiles"
    done = _settings_in_a_fresh_process(
        tmp_path,
        ANONWEB_STORAGE="s3",
        AWS_STORAGE_BUCKET_NAME="releases-bucket",
        AWS_S3_ENDPOINT_URL="http://minio:9000",
        AWS_S3_REGION_NAME="eu-west-1",
        AWS_ACCESS_KEY_ID="key-id",
        AWS_SECRET_ACCESS_KEY="secret",
    )
    configured = json.loads(done.stdout)["anonweb"]
    assert configured["BACKEND"] == "anonweb.common.s3files.S3Files"
    options = configured["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"]) == (
        "releases-bucket",
        "http://minio:9000",
        "eu-west-1",
    )
    assert (options["access_key"], options["secret_key"], options["default_acl"]) == (
        "key-id",
        "secret",
        None,
    )
    missing = _settings_in_a_fresh_process(tmp_path, ANONWEB_STORAGE="s3")
    assert missing.returncode != 0 and "AWS_STORAGE_BUCKET_NAME" in missing.stderr
    wrong = _settings_in_a_fresh_process(tmp_path, ANONWEB_STORAGE="ftp")
    assert wrong.returncode != 0 and "ANONWEB_STORAGE='ftp'" in wrong.stderr
