"""Load test: 50 concurrent users and 10 running jobs against gunicorn + PostgreSQL + Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/anonweb_load \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/9 \\
    .venv/bin/python bench/load.py [--users 50] [--jobs 10] [--seconds 60] [--think 0.5]

What it does (everything on 127.0.0.1, in a temporary folder):
1. drops and creates the database named in DATABASE_URL, migrates it, and seeds one team with
   officers, stewards and analysts, the demo dataset (3,016 rows) with its risk profile, and an
   approved release;
2. starts gunicorn (``--workers``, 4 threads each) and a Celery worker (``--jobs`` processes)
   with production settings (DEBUG off), then launches ``--jobs`` jobs that keep running (and
   beating their heartbeat) for the whole test;
3. logs ``--users`` users in through the login form and lets each browse for ``--seconds``
   with a random pause of up to ``2 * --think`` seconds between pages: analysts list, open and
   download releases; stewards open the home page, the dataset's risk page, the release and the
   audit trail; officers open the risk page, the plan page, the job list and a job's status;
4. prints per page and overall: requests, errors (any status but 200, any exception),
   p50/p95/p99 latency in ms, requests per second, and the machine's load average before and
   after. Goal: p95 < 500 ms, 0 errors.

The web workers share one cache, ANONWEB_CACHE_URL, by default the broker's Redis database.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import io
import os
import random
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PASSWORD = "load-test-" + secrets.token_urlsafe(12)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recreate_database(url: str) -> None:
    import psycopg

    parts = urllib.parse.urlparse(url)
    name = parts.path.lstrip("/")
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise SystemExit(f"database name {name!r}: use lower-case letters, digits and _")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _seed(users: int) -> dict:
    """Team, users, dataset with a profile, an approved release. Returns what the users need."""
    import django

    django.setup()
    import pandas as pd
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.db import transaction

    from anonweb.accounts.models import Role, Team
    from anonweb.accounts.services import membership_grant
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import Job, JobKind, JobStatus
    from anonweb.jobs.publication import release_create
    from anonweb.jobs.services import job_create
    from anonweb.releases.services import release_approve

    call_command("migrate", verbosity=0)
    # Production settings name static files after their content (the manifest): without it
    # every page that links a script or a style sheet fails.
    call_command("collectstatic", interactive=False, verbosity=0)
    User = get_user_model()
    team = Team.objects.create(name="Load team", slug="load")
    roles = {
        Role.ANALYST: max(1, users * 4 // 10),
        Role.DATA_STEWARD: max(1, users * 3 // 10),
    }
    roles[Role.PRIVACY_OFFICER] = max(1, users - sum(roles.values()))
    people: list[tuple[str, str]] = []
    for role, count in roles.items():
        for i in range(count):
            user = User.objects.create_user(username=f"{role}{i}", password=PASSWORD)
            membership_grant(actor=None, team=team, user=user, role=role, via="load test")
            people.append((user.username, str(role)))
    officer = User.objects.get(username=f"{Role.PRIVACY_OFFICER}0")
    steward = User.objects.get(username=f"{Role.DATA_STEWARD}0")
    csv = (ROOT / "anonweb/demo/adult_subset.csv").read_bytes()
    dataset = dataset_create(
        user=officer, team=team, upload=SimpleUploadedFile("adult.csv", csv), name="adult"
    )
    tags = {c: "quasi_identifier" for c in ("age", "sex", "race", "marital-status", "education")}
    tags["salary-class"] = "sensitive"
    dataset = dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={k: v for k, v in tags.items() if k in dataset.column_names},
    )
    with transaction.atomic():
        profile = job_create(user=officer, team=team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=profile.pk, worker="load-seed")
    job = Job.objects.create(
        team=team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    frame = pd.read_csv(io.BytesIO(csv), sep=";")
    frame = frame[[c for c in dataset.column_names if dataset.tags.get(c) != "identifier"]]
    release = release_create(
        job=job, frame=frame.head(2000), plan={"steps": []}, report={}, title="load release"
    )
    release_approve(user=steward, release=release, note="for the load test")
    # A release as a plan makes it (report, risk after, utility, gate): what people open.
    plan = {
        "version": 1,
        "quasi_identifiers": ["age", "sex", "race", "marital-status", "education"],
        "sensitive": ["salary-class"],
        "hierarchies": {"age": {"builder": "interval", "width": 10}},
        "steps": [{"kind": "generalize", "params": {"levels": {"age": 2}}}],
    }
    with transaction.atomic():
        made = job_create(
            user=officer,
            team=team,
            kind=JobKind.ANONYMIZE,
            dataset=dataset,
            params={"plan": plan, "title": "generalized", "purpose": "load test"},
        )
    job_execute(job_id=made.pk, worker="load-seed")
    made.refresh_from_db()
    if made.status != JobStatus.SUCCEEDED:
        raise RuntimeError(f"the seed release's job failed: {made.error}")
    planned = made.release
    release_approve(user=steward, release=planned, override="accepted for the load test " * 2)
    return {"people": people, "dataset": dataset.pk, "release": planned.pk, "job": profile.pk}


class Client:
    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def _cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with self.opener.open(self.base + path, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def login(self, username: str) -> None:
        self.get("/accounts/login/")
        data = urllib.parse.urlencode(
            {
                "username": username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": self._cookie("csrftoken"),
            }
        ).encode()
        request = urllib.request.Request(self.base + "/accounts/login/", data=data)
        with self.opener.open(request, timeout=60) as response:
            response.read()
        if not self._cookie("sessionid"):
            raise RuntimeError(f"login of {username} failed")


def _pages(role: str, ids: dict, jobs: list[int]) -> list[tuple[str, str]]:
    d, r = ids["dataset"], ids["release"]
    if role == "analyst":
        return [
            ("release list", "/releases/"),
            ("release page", f"/releases/{r}/"),
            ("release download", f"/releases/{r}/download/"),
        ]
    if role == "data_steward":
        return [
            ("home", "/"),
            ("risk page", f"/datasets/{d}/"),
            ("release page", f"/releases/{r}/"),
            ("audit trail", "/audit/"),
        ]
    return [
        ("risk page", f"/datasets/{d}/"),
        ("plan page", f"/jobs/plan/{d}/"),
        ("job list", "/jobs/"),
        ("job status", f"/jobs/{random.choice(jobs)}/status.json"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--think", type=float, default=0.5, help="mean pause between pages")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument(
        "--warm", action="store_true", help="open each role's pages a few times before measuring"
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="print each page's CPU time per request, measured inside the web processes",
    )
    parser.add_argument(
        "--profile",
        default="",
        metavar="VIEW",
        help="with --cpu, run this view (e.g. datasets:detail) under cProfile in the web "
        "processes and print its heaviest calls",
    )
    args = parser.parse_args()

    database = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not database.startswith("postgres") or not broker.startswith("redis"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis)")
    var = Path(tempfile.mkdtemp(prefix="anonweb-load-"))
    port = _free_port()
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "anonweb.settings",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DEBUG": "0",
            "ANONWEB_VAR_DIR": str(var),
            "ALLOWED_HOSTS": "127.0.0.1",
            "ANONWEB_JOB_STALE_SECONDS": "120",
            "LOG_LEVEL": "WARNING",
            # Every worker shares one cache (what is built once is built once for all of them):
            # the broker's Redis unless another is named.
            "ANONWEB_CACHE_URL": os.environ.get("ANONWEB_CACHE_URL", broker),
        }
    )
    cpu_dir = var / "cpu"
    if args.cpu or args.profile:
        env["ANONWEB_REQUEST_CPU_DIR"] = str(cpu_dir)
        if args.profile:
            env["ANONWEB_REQUEST_PROFILE"] = args.profile
    os.environ.update(env)
    print(f"==> database {database.rsplit('/', 1)[1]}, broker {broker}, files in {var}")
    print(f"==> load average before: {_load()}")
    _recreate_database(database)
    import redis

    redis.Redis.from_url(broker).flushdb()
    seeded = _seed(args.users)
    bin_dir = Path(sys.executable).parent
    procs = []
    wall = args.seconds
    try:
        procs.append(
            subprocess.Popen(
                [
                    str(bin_dir / "celery"),
                    "-A",
                    "anonweb.celery",
                    "worker",
                    "--loglevel=WARNING",
                    f"--concurrency={args.jobs}",
                    "--queues",
                    env.get("ANONWEB_QUEUE", "anonweb"),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(var / "worker.log", "w"),  # noqa: SIM115
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    str(bin_dir / "gunicorn"),
                    "anonweb.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    str(args.workers),
                    "--threads",
                    "4",
                    "--log-level",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(var / "web.log", "w"),  # noqa: SIM115
            )
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=10)
                break
            except OSError:  # not up yet (refused, timed out, 503)
                time.sleep(0.3)
        jobs = _launch_jobs(args.jobs, args.seconds + 60)
        running = _wait_running(jobs, timeout=60)
        print(f"==> {running} of {len(jobs)} jobs running; logging {args.users} users in")
        clients = []
        for username, role in seeded["people"]:
            client = Client(base)
            client.login(username)
            clients.append((client, role))
        results: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, int] = defaultdict(int)
        lock = threading.Lock()
        stop = [0.0]  # set when the measured browsing starts

        def browse(client: Client, role: str) -> None:
            rng = random.Random()
            while time.monotonic() < stop[0]:
                for name, path in _pages(role, seeded, jobs):
                    if time.monotonic() >= stop[0]:
                        return
                    started = time.perf_counter()
                    try:
                        status, _ = client.get(path)
                    except Exception:
                        status = -1
                    elapsed = (time.perf_counter() - started) * 1000
                    with lock:
                        results[name].append(elapsed)
                        if status != 200:
                            errors[name] += 1
                    time.sleep(rng.uniform(0, 2 * args.think))

        if args.warm:
            # Each role's pages once, unmeasured: what every worker does on its first request
            # (imports, templates, connections) is then not counted as the pages' cost.
            seen: set[str] = set()
            for client, role in clients:
                if role not in seen:
                    seen.add(role)
                    for _name, path in _pages(role, seeded, jobs):
                        for _ in range(args.workers):
                            client.get(path)
        print(f"==> browsing for {args.seconds:.0f} s")
        cpu_before = _tree_cpu(procs[1].pid), _tree_cpu(procs[0].pid), _self_cpu()
        # Only the measured browsing is counted (not the logins and the warming).
        for old in cpu_dir.glob("cpu-*.tsv"):
            old.unlink()
        stop[0] = time.monotonic() + args.seconds
        threads = [threading.Thread(target=browse, args=c) for c in clients]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - started
        cpu_after = _tree_cpu(procs[1].pid), _tree_cpu(procs[0].pid), _self_cpu()
        load_after = _load()
        still_running = _count_running(jobs)
        _report(results, errors, wall, still_running, len(jobs))
        print(f"load average (1, 5, 15 min) at the end: {load_after} on {os.cpu_count()} cores")
        served = sum(len(v) for v in results.values())
        used = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
        print(
            "CPU per request (user + system, ms): web (gunicorn) "
            f"{used[0] * 1000 / served:.1f}, worker (celery) {used[1] * 1000 / served:.1f}, "
            f"load generator {used[2] * 1000 / served:.1f}; PostgreSQL and Redis not counted"
        )
        total_errors = sum(errors.values())
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.cpu or args.profile:
            _report_cpu(cpu_dir, wall)
        if args.profile:
            _report_profile(cpu_dir)
        shutil.rmtree(var, ignore_errors=True)
    return 0 if total_errors == 0 else 1


def _report_cpu(folder: Path, wall: float) -> None:
    """CPU per request per view, from the lines the web processes wrote (request_cpu.py)."""
    rows: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for path in folder.glob("cpu-*.tsv"):
        for line in path.read_text().splitlines():
            name, _status, wall_ms, cpu_ms, queries = line.split("\t")
            rows[name].append((float(wall_ms), float(cpu_ms), int(queries)))
    if not rows:
        print("no CPU figures written")
        return
    print(
        f"\n{'view (in the web processes)':<30}{'requests':>9}{'CPU p50':>9}{'CPU p95':>9}"
        f"{'CPU s':>8}{'wall p50':>10}{'queries':>8}"
    )
    total = 0.0
    for name in sorted(rows, key=lambda n: -sum(r[1] for r in rows[n])):
        values = rows[name]
        cpu = [r[1] for r in values]
        total += sum(cpu) / 1000
        print(
            f"{name:<30}{len(values):>9}{_pct(cpu, 50):>9.1f}{_pct(cpu, 95):>9.1f}"
            f"{sum(cpu) / 1000:>8.1f}{_pct([r[0] for r in values], 50):>10.0f}"
            f"{statistics.median(r[2] for r in values):>8.0f}"
        )
    print(
        f"web CPU in views: {total:.1f} s over {wall:.0f} s ({total / wall:.2f} of a core; "
        "middleware outside the counter, gunicorn and the network not counted)"
    )


def _report_profile(folder: Path) -> None:
    import pstats

    files = sorted(folder.glob("profile-*.pstats"))
    if not files:
        print("no profile written (fewer than 20 requests of that view per process?)")
        return
    stats = pstats.Stats(str(files[0]))
    for path in files[1:]:
        stats.add(str(path))
    stats.sort_stats("cumulative").print_stats("anonweb", 30)
    stats.sort_stats("tottime").print_stats(25)


def _proc_cpu(pid: int) -> tuple[int, float]:
    """(parent pid, user + system CPU seconds) of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


def _tree_cpu(root: int) -> float:
    """CPU seconds used so far by ``root`` and every process below it (gunicorn's workers,
    celery's pool): the server's cost, whatever the wall time under a shared machine's load."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _proc_cpu(int(entry))
            except OSError:  # ended meanwhile
                continue
    below, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in below:
                below.add(pid)
                frontier.append(pid)
    return sum(table[pid][1] for pid in below if pid in table)


def _self_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _launch_jobs(n: int, seconds: float) -> list[int]:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from anonweb.accounts.models import Team
    from anonweb.jobs.models import JobKind
    from anonweb.jobs.services import job_create

    officer = get_user_model().objects.get(username="privacy_officer0")
    team = Team.objects.get(slug="load")
    ids = []
    for _ in range(n):
        with transaction.atomic():
            job = job_create(
                user=officer,
                team=team,
                kind=JobKind.DEMO_SLEEP,
                params={"steps": int(seconds), "delay": 1.0},
            )
        ids.append(job.pk)
    return ids


def _count_running(ids: list[int]) -> int:
    from anonweb.jobs.models import Job, JobStatus

    return Job.objects.filter(pk__in=ids, status=JobStatus.RUNNING).count()


def _wait_running(ids: list[int], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = _count_running(ids)
        if running == len(ids):
            return running
        time.sleep(0.5)
    return _count_running(ids)


def _load() -> str:
    """The machine's load average: the figures mean little without it on a shared machine."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _report(results, errors, wall: float, running: int, jobs: int) -> None:
    print(f"\n{'page':<18}{'requests':>9}{'errors':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    everything: list[float] = []
    for name in sorted(results):
        values = results[name]
        everything += values
        print(
            f"{name:<18}{len(values):>9}{errors[name]:>7}{_pct(values, 50):>9.0f}"
            f"{_pct(values, 95):>9.0f}{_pct(values, 99):>9.0f}"
        )
    total_errors = sum(errors.values())
    print(
        f"{'all':<18}{len(everything):>9}{total_errors:>7}{_pct(everything, 50):>9.0f}"
        f"{_pct(everything, 95):>9.0f}{_pct(everything, 99):>9.0f}"
    )
    print(
        f"\n{len(everything) / wall:.1f} requests/s over {wall:.0f} s; mean "
        f"{statistics.fmean(everything):.0f} ms; {running} of {jobs} jobs still running at the end"
    )
    goal = _pct(everything, 95) < 500 and total_errors == 0
    print(f"goal p95 < 500 ms and 0 errors: {'met' if goal else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
