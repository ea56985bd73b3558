"""Fuzzing the two ways data and instructions come in: hostile uploads and plan payloads.

Each generated upload goes through the upload page and the job that reads it; each plan through
the plan page. Every answer must be a refusal with a clear message or a success: never a server
error, never an internal-error job, never a half-saved dataset, job or budget reservation.
The figures (examples tried, answers by kind, peak memory) are printed with ``-s``.
"""

from __future__ import annotations

import io
import json
import resource
import zipfile
from collections import Counter

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.test import TestCase
from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anonweb.datasets.models import Dataset, DatasetStatus
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.models import PrivacyCharge

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

UPLOAD_EXAMPLES = 300
PLAN_EXAMPLES = 300
FUZZ = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- hostile uploads ------------------------------------------------------------------------


def _xlsx(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_excel(buf, index=False)
    return buf.getvalue()


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _zip_bomb() -> bytes:
    """A workbook whose sheet expands to 64 MB of XML from a few hundred KB."""
    good = zipfile.ZipFile(io.BytesIO(_xlsx(pd.DataFrame({"a": [1]}))))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for info in good.infolist():
            data = good.read(info.filename)
            if info.filename.endswith("sheet1.xml"):
                data = data.replace(b"<sheetData>", b"<sheetData>" + b" " * (64 * 1024**2))
            out.writestr(info.filename, data)
    return buf.getvalue()


_FIXED: list[tuple[str, bytes]] = []


def _fixed() -> list[tuple[str, bytes]]:
    if not _FIXED:
        wide = ",".join(f"c{i}" for i in range(100_000))
        _FIXED.extend(
            [
                ("wide.csv", (wide + "\n" + ",".join("1" * 100_000) + "\n").encode()),
                ("bomb.xlsx", _zip_bomb()),
                ("nul.csv", b"a,b\n1,\x002\n"),
                ("utf16.csv", "a,b\n1,2\n".encode("utf-16")),
                ("mixed.csv", "a,b\né,1\n".encode() + b"\xe9,2\n"),
                ("undefined.csv", b"a,b\n\x81,1\n"),
                (
                    "nested.parquet",
                    _parquet(pa.table({"a": pa.array([[1, 2], [3]]), "b": [1, 2]})),
                ),
                ("struct.parquet", _parquet(pa.table({"s": pa.array([{"x": 1}, {"x": 2}])}))),
                ("binary.parquet", _parquet(pa.table({"b": pa.array([b"\x00\x01", b"x"])}))),
                ("dupes.csv", b"a,a\n1,2\n"),
                ("empty.csv", b""),
                ("header-only.csv", b"a,b\n"),
                ("unclosed.csv", b'a,b\n"1,2\n3,4\n'),
                ("ragged.csv", b"a,b\n1,2,3\n"),
                ("old.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512),
                ("program.exe", b"MZ\x90\x00"),
                ("cells.csv", b"a,b,c,d,e\n" + b"1,2,3,4,5\n" * 50_000),
            ]
        )
    return _FIXED


_CELL = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(["=1+1", '"', '""', "\r", "\n", "\x00", "NA", "-0", "1e400", "007"])


@st.composite
def _csv_like(draw) -> tuple[str, bytes]:
    columns = draw(st.integers(1, 8))
    rows = draw(st.lists(st.lists(_CELL, min_size=columns, max_size=columns), max_size=12))
    header = draw(st.lists(_CELL, min_size=columns, max_size=columns))
    sep = draw(st.sampled_from([",", ";", "\t", "|"]))
    buf = io.StringIO()
    import csv

    writer = csv.writer(buf, delimiter=sep, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(header)
    writer.writerows(rows)
    data = buf.getvalue().encode("utf-8", "surrogatepass")
    # Damage: bytes no encoding has, a cut in the middle, or a different encoding.
    damage = draw(st.sampled_from(["none", "bytes", "cut", "latin", "utf16"]))
    if damage == "bytes" and data:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    elif damage == "cut" and data:
        data = data[: draw(st.integers(0, len(data)))]
    elif damage == "latin":
        data = buf.getvalue().encode("latin-1", "replace")
    elif damage == "utf16":
        data = buf.getvalue().encode("utf-16")
    name = draw(st.sampled_from(["t.csv", "t.tsv", "t.txt", "t.csv"]))
    return name, data


_BASE: dict[str, bytes] = {}


def _base(kind: str) -> bytes:
    """A small valid file of each kind, made once (a workbook's bytes carry the time)."""
    if kind not in _BASE:
        frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]})
        _BASE[kind] = _xlsx(frame) if kind == "xlsx" else _parquet(pa.Table.from_pandas(frame))
    return _BASE[kind]


@st.composite
def _damaged_binary(draw) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["xlsx", "parquet", "junk"]))
    data = _base(kind) if kind != "junk" else draw(st.binary(max_size=2048))
    if data and draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at + 1 :]
    if data and draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    suffix = draw(st.sampled_from([".xlsx", ".parquet", ".csv", ".xlsx"]))
    return f"t{suffix}", data


_UPLOADS = st.one_of(
    _csv_like(),
    _damaged_binary(),
    st.integers(0, 16).map(lambda i: _fixed()[i]),
)


@pytest.fixture
def django_settings(settings):
    return settings


@pytest.fixture
def fuzz_limits(settings):
    # Small limits so that the hostile cases reach them quickly.
    settings.ANONWEB_MAX_COLUMNS = 500
    settings.ANONWEB_MAX_CELLS = 200_000
    settings.ANONWEB_MAX_EXPANDED_BYTES = 32 * 1024**2
    settings.ANONWEB_MAX_UPLOAD_BYTES = 2 * 1024**2


def _files(settings) -> list[str]:
    root = settings.MEDIA_ROOT / "datasets"
    return [str(p) for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_hostile_uploads_are_refused_clearly_and_leave_nothing(
    client, officer, team, django_settings, fuzz_limits
):
    settings_ = django_settings
    client.force_login(officer)
    answers: Counter = Counter()
    counter = iter(range(10**9))
    start = _peak_mb()

    @settings(FUZZ, max_examples=UPLOAD_EXAMPLES)
    @settings_examples
    @given(upload=_UPLOADS)
    def run(upload):
        from django.core.files.uploadedfile import SimpleUploadedFile

        if upload[0] == "fixed":
            upload = _fixed()[upload[1]]
        name, data = upload
        number = next(counter)
        response = client.post(
            reverse("datasets:upload"),
            {"team": team.pk, "name": f"fuzz {number}", "file": SimpleUploadedFile(name, data)},
        )
        assert response.status_code in (302, 400, 413, 415), (name, response.status_code)
        dataset = Dataset.objects.filter(name=f"fuzz {number}").first()
        if response.status_code != 302:
            assert dataset is None
            answers[f"refused at upload ({response.status_code})"] += 1
            return
        for job in Job.objects.filter(kind=JobKind.PARSE, status=JobStatus.QUEUED):
            with TestCase.captureOnCommitCallbacks(execute=True):
                job_execute(job_id=job.pk, worker="fuzz")
            job.refresh_from_db()
            assert "internal error" not in job.error, (name, job.error)
        dataset.refresh_from_db()
        if dataset.status == DatasetStatus.READY:
            assert dataset.rows > 0 and dataset.columns
            answers["read"] += 1
        else:
            assert dataset.status == DatasetStatus.FAILED
            message = dataset.error
            assert message and "\n" not in message and len(message) <= 1000, message
            assert "Traceback" not in message and "Error(" not in message, message
            folder = settings_.MEDIA_ROOT / "datasets" / str(dataset.storage_key)
            assert not folder.exists() or not any(folder.iterdir()), (name, message)
            answers["refused by the reading job"] += 1

    run()
    total = sum(answers.values())
    assert total >= UPLOAD_EXAMPLES
    assert answers["refused by the reading job"] > 0 and answers["read"] > 0
    # Nothing of a refused upload stays on disk.
    failed = Dataset.objects.exclude(status=DatasetStatus.READY)
    assert not [f for f in _files(settings_) if any(str(d.storage_key) in f for d in failed)]
    incoming = settings_.MEDIA_ROOT / "incoming"
    assert not incoming.exists() or not any(incoming.iterdir())
    print(
        f"\nupload fuzz: {total} uploads, {dict(answers)}, 0 server errors, "
        f"peak memory {_peak_mb():.0f} MB (was {start:.0f} MB before)"
    )
    assert _peak_mb() - start < 1024


def settings_examples(fn):
    """The fixed hostile files are always tried, whatever hypothesis draws."""
    for i in range(17):
        fn = example(upload=("fixed", i))(fn)
    return fn


# --- plan payloads ----------------------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_KINDS = st.sampled_from(
    [
        "drop",
        "suppress",
        "tokenize",
        "codebook",
        "regex_mask",
        "date_shift",
        "add_noise",
        "microaggregation",
        "pram",
        "swap",
        "generalize",
        "optimal_generalization",
        "mondrian",
        "ldp_randomized_response",
        "ldp_laplace",
        "dp_release",
        "dp_synthetic",
        "no_such_step",
    ]
)
_PARAM_NAMES = st.sampled_from(
    [
        "columns",
        "column",
        "k",
        "epsilon",
        "delta",
        "pattern",
        "replacement",
        "values",
        "key",
        "suppression",
        "bounds",
        "categories",
        "levels",
        "max_days",
        "person",
        "sd",
        "scale",
        "p",
        "models",
        "matrix",
        "codebook",
        "width",
        "preset",
    ]
)
_COLUMNS = st.sampled_from(["name", "zip", "age", "sex", "disease", "nope"])
_VALUES = st.one_of(
    _JSON,
    st.lists(_COLUMNS, max_size=4),
    _COLUMNS,
    st.sampled_from(
        [True, False, 1e9, 10**20, 1e308, -1, 0, 709.9, 1000, "(a+)+$", "(x*)*y", "\\", "[", 2.5]
    ),
)


@st.composite
def _plan_text(draw) -> str:
    shape = draw(st.sampled_from(["structured", "structured", "json", "deep", "text"]))
    if shape == "deep":
        depth = draw(st.integers(20, 200_000))
        return '{"steps": ' + "[" * depth + "]" * depth + "}"
    if shape == "text":
        return draw(st.text(max_size=200))
    if shape == "json":
        return json.dumps(draw(_JSON))
    steps = draw(
        st.lists(
            st.fixed_dictionaries(
                {"kind": _KINDS, "params": st.dictionaries(_PARAM_NAMES, _VALUES, max_size=4)}
            ),
            max_size=4,
        )
    )
    plan = {
        "version": draw(st.sampled_from([1, 1, 2, "1", None])),
        "quasi_identifiers": draw(st.lists(_COLUMNS, max_size=3)),
        "sensitive": draw(st.lists(_COLUMNS, max_size=2)),
        "steps": steps,
    }
    if draw(st.booleans()):
        plan["hierarchies"] = draw(
            st.dictionaries(
                _COLUMNS,
                st.one_of(
                    st.fixed_dictionaries({"builder": st.sampled_from(["interval", "x"])}),
                    st.fixed_dictionaries({"rows": st.lists(st.lists(_VALUES, max_size=3))}),
                    _JSON,
                ),
                max_size=2,
            )
        )
    return json.dumps(plan)


def test_hostile_plans_are_refused_clearly_and_save_nothing(client, officer, dataset):
    client.force_login(officer)
    url = reverse("jobs:plan", args=[dataset.pk])
    answers: Counter = Counter()

    @settings(FUZZ, max_examples=PLAN_EXAMPLES)
    @example(text='{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}", preview=False)
    @example(text='{"steps": [{"kind": "mondrian", "params": {"k": true}}]}', preview=False)
    @example(text='{"steps": [{"kind": "mondrian", "params": {"k": 1e9}}]}', preview=False)
    @example(
        text='{"steps": [{"kind": "regex_mask", "params": {"columns": ["name"], '
        '"pattern": "(a+)+$", "replacement": "x"}}]}',
        preview=False,
    )
    @example(
        text='{"steps": [{"kind": "ldp_laplace", "params": {"column": "age", '
        '"epsilon": 1e308, "bounds": [0, 100]}}]}',
        preview=False,
    )
    @given(text=_plan_text(), preview=st.booleans())
    def run(text, preview):
        jobs, charges = Job.objects.count(), PrivacyCharge.objects.count()
        data = {"title": "fuzz", "purpose": "fuzzing", "recipient": "nobody", "plan": text}
        if preview:
            data["preview"] = "1"
        response = client.post(url, data)
        assert response.status_code in (200, 302, 400), response.status_code
        if response.status_code == 302:
            answers["launched"] += 1
            return
        assert Job.objects.count() == jobs and PrivacyCharge.objects.count() == charges
        if response.status_code == 400:
            errors = response.context["form"].errors
            assert errors
            for messages in errors.values():
                for message in messages:
                    assert message.strip() and "Traceback" not in message, message
            answers["refused (400)"] += 1
        else:
            answers["previewed"] += 1

    run()
    total = sum(answers.values())
    assert total >= PLAN_EXAMPLES and answers["refused (400)"] > 0
    assert answers["launched"] + answers["previewed"] > 0
    print(f"\nplan fuzz: {total} plans, {dict(answers)}, 0 server errors")
