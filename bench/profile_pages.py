"""Time and count the queries of each page a team browses, through Django's test client.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/anonweb_profile \\
    .venv/bin/python bench/profile_pages.py [--repeat 20] [--profile "release page (officer)"]

Seeds the database as ``bench/load.py`` does (it drops and creates it), then asks each page
``--repeat`` times as the role that opens it and prints, per page, the first view (with
``--cold``, the cache emptied after seeding: it builds what the publishing job built), the median of the following ones in ms, and the queries of the last view.
``--profile NAME`` runs that page once more under cProfile and prints its heaviest calls;
``--queries NAME`` prints the SQL of that page's last view.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import os
import pstats
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _pages(ids: dict) -> list[tuple[str, str, str]]:
    d, r, j = ids["dataset"], ids["release"], ids["job"]
    return [
        ("home", "data_steward", "/"),
        ("risk page", "privacy_officer", f"/datasets/{d}/"),
        ("plan page", "privacy_officer", f"/jobs/plan/{d}/"),
        ("job list", "privacy_officer", "/jobs/"),
        ("job status", "privacy_officer", f"/jobs/{j}/status.json"),
        ("release list", "analyst", "/releases/"),
        ("release page (analyst)", "analyst", f"/releases/{r}/"),
        ("release page (officer)", "privacy_officer", f"/releases/{r}/"),
        ("release download", "analyst", f"/releases/{r}/download/"),
        ("signoff", "privacy_officer", f"/releases/{r}/signoff.html"),
        ("audit trail", "data_steward", "/audit/"),
        ("api releases", "analyst", "/api/v1/releases/"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--profile", default="")
    parser.add_argument(
        "--profile-repeat", type=int, default=1, help="views of the profiled page summed"
    )
    parser.add_argument("--only", default="", help="only the pages whose name contains this")
    parser.add_argument("--queries", default="", help="print the SQL of this page's last view")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="empty the cache after seeding: the first views build what publication built",
    )
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL (PostgreSQL; the database is dropped and created)")
    var = Path(tempfile.mkdtemp(prefix="anonweb-profile-"))
    atexit.register(shutil.rmtree, var, True)  # its files are the run's own
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "anonweb.settings",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DEBUG": "0",
            "ANONWEB_VAR_DIR": str(var),
            "ALLOWED_HOSTS": "testserver",
            "LOG_LEVEL": "WARNING",
        }
    )
    import load  # bench/load.py: the same seed as the load test

    load._recreate_database(os.environ["DATABASE_URL"])
    ids = load._seed(3)
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    if args.cold:
        cache.clear()
    users = {}
    for username, role in ids["people"]:
        users.setdefault(role, get_user_model().objects.get(username=username))
    print(f"{'page':<26}{'first ms':>10}{'median ms':>11}{'queries':>9}{'KB':>8}")
    for name, role, path in _pages(ids):
        if args.only not in name:
            continue
        client = Client()
        client.force_login(users[role])
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            with CaptureQueriesContext(connection) as ctx:
                response = client.get(path)
                if hasattr(response, "streaming_content"):
                    body = b"".join(response.streaming_content)
                else:
                    body = response.content
            times.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{name}: {response.status_code}")
        rest = statistics.median(times[1:]) if len(times) > 1 else float("nan")
        print(f"{name:<26}{times[0]:>10.1f}{rest:>11.1f}{len(ctx):>9}{len(body) / 1024:>8.0f}")
        if name == args.queries:
            for query in ctx.captured_queries:
                print(f"    {query['time']}s  {query['sql'][:300]}")
        if name == args.profile:
            profiler = cProfile.Profile(time.thread_time)  # CPU: the machine may be shared
            for _ in range(args.profile_repeat):
                profiler.enable()
                client.get(path)
                profiler.disable()
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats("anonweb", 25)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
