"""CPU per request, measured where the load test sees it: inside each web process.

Development and benchmarks only: the middleware is installed when ``ANONWEB_REQUEST_CPU_DIR``
names a folder (``bench/load.py --cpu`` sets it), never otherwise. Each process appends one
line per request to ``<dir>/cpu-<pid>.tsv``: the view's name, the status, wall and CPU
milliseconds of the thread that served it (``time.thread_time``: what this request cost the
machine, not how long it waited for the cores), and its SQL queries. Wall time under load
includes waiting for the GIL and the cores; CPU time does not, so it says which page to cut.

``ANONWEB_REQUEST_PROFILE=<view name>`` also runs that view's requests under cProfile and
writes the sum over each process's requests to ``<dir>/profile-<view>-<pid>.pstats`` (every
twenty requests), to read with ``python -m pstats``.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time
from pathlib import Path

from django.db import connection
from django.urls import Resolver404, resolve


class RequestCpuMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.folder = Path(os.environ["ANONWEB_REQUEST_CPU_DIR"])
        self.folder.mkdir(parents=True, exist_ok=True)
        self.profile_view = os.environ.get("ANONWEB_REQUEST_PROFILE", "")
        self.lock = threading.Lock()
        self.stats: pstats.Stats | None = None
        self.profiled = 0

    def __call__(self, request):
        try:
            match = resolve(request.path_info)
            url_name = match.url_name or "unnamed"
            name = f"{match.namespace}:{url_name}" if match.namespace else url_name
        except Resolver404:
            name = "404"
        queries = [0]

        def count(execute, sql, params, many, context):
            queries[0] += 1
            return execute(sql, params, many, context)

        # CPU time, not wall: under load, wall time is mostly waiting for the cores
        profiler = cProfile.Profile(time.thread_time) if name == self.profile_view else None
        wall, cpu = time.perf_counter(), time.thread_time()
        with connection.execute_wrapper(count):
            if profiler is not None:
                profiler.enable()
            response = self.get_response(request)
            if profiler is not None:
                profiler.disable()
        cpu_ms = (time.thread_time() - cpu) * 1000
        wall_ms = (time.perf_counter() - wall) * 1000
        line = f"{name}\t{response.status_code}\t{wall_ms:.2f}\t{cpu_ms:.2f}\t{queries[0]}\n"
        with self.lock:
            with open(self.folder / f"cpu-{os.getpid()}.tsv", "a") as out:
                out.write(line)
            if profiler is not None:
                self._keep(profiler, name)
        return response

    def _keep(self, profiler: cProfile.Profile, name: str) -> None:
        if self.stats is None:
            self.stats = pstats.Stats(profiler)
        else:
            self.stats.add(profiler)
        self.profiled += 1
        if self.profiled % 20 == 0:
            safe = name.replace(":", "-")
            self.stats.dump_stats(self.folder / f"profile-{safe}-{os.getpid()}.pstats")
