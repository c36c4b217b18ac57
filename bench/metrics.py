"""What one `/metrics` scrape costs the server (CPU) and Redis (CPU), with N jobs on the broker.

Starts its own redis-server on a free port, creates `--jobs` jobs of `--parts` parts each (real parts:
a few 17-clue puzzles solved, stored as workers store them), a few live worker beats, then scrapes
through the route's handler body (`generate_latest` over the server's `FleetCollector`) `--scrapes`
times: the server's CPU by `time.process_time` around each scrape (median), Redis's by `INFO cpu`
(used_cpu_user + used_cpu_sys) before and after, divided by the scrapes. Two cases: steady (no
part arrived since the last scrape) and a first scrape (every part of every job read: the server's
tallies are forgotten before each). The redis-server is stopped by pid at the end.

    .venv/bin/python bench/metrics.py                       # 50 jobs of 20 parts, 200 scrapes
    .venv/bin/python bench/metrics.py --jobs 200 --parts 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import redis
from prometheus_client import CollectorRegistry, generate_latest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from client.batch import BatchClient  # noqa: E402
from pipeline.engine.solve import solve_chunk  # noqa: E402
from tests.conftest import SAMPLE, chunk_task, free_port  # noqa: E402
from web.backend import Backend  # noqa: E402
from web.metrics import FleetCollector  # noqa: E402
from web.settings import ServeSettings  # noqa: E402


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def fill(backend: Backend, r: redis.Redis, jobs: int, parts: int) -> None:
    """`jobs` jobs of `parts` parts of 5 solved puzzles each, and 4 live worker processes on 2 hosts."""
    lines = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")][:5]
    part = solve_chunk(chunk_task("0" * 32, lines))
    now = time.time()
    for j in range(jobs):
        job = f"{j:032x}"
        meta = {"created": f"{now - j:.3f}", "state": "produced", "total": str(5 * parts), "cpu_ns": "123"}
        backend.client.store.create(job, meta)
        for c in range(parts):
            part.header.job, part.header.chunk, part.header.stats.chunk = job, c, c
            backend.client.store.put_result(job, part)
    r.zadd("sbatch:workers", {"a:1": now + 3600, "a:2": now + 3600, "b:1": now + 3600, "b:2": now + 3600})


def measure(registry: CollectorRegistry, collector: FleetCollector, r: redis.Redis, n: int, fresh: bool):
    """(median server CPU ms, Redis CPU ms per scrape) over `n` scrapes; `fresh`: every part read again."""
    generate_latest(registry)  # the tallies (and the job list) once
    cpu, before = [], redis_cpu(r)
    for _ in range(n):
        if fresh:
            collector._tallies.clear()
        t0 = time.process_time()
        generate_latest(registry)
        cpu.append(time.process_time() - t0)
    return 1000 * statistics.median(cpu), 1000 * (redis_cpu(r) - before) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--parts", type=int, default=20)
    p.add_argument("--scrapes", type=int, default=200)
    args = p.parse_args()
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="bench-metrics-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        r = redis.Redis.from_url(url)
        deadline = time.monotonic() + 10
        while True:
            try:
                r.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        backend = Backend(BatchClient(url), types.SimpleNamespace(), ServeSettings())
        fill(backend, r, args.jobs, args.parts)
        collector = FleetCollector(backend)
        registry = CollectorRegistry(auto_describe=True)
        registry.register(collector)
        size = len(generate_latest(registry))
        print(
            f"load: {os.getloadavg()[0]:.2f}; {args.jobs} jobs x {args.parts} parts; a scrape is {size} bytes"
        )
        for name, fresh in (("steady (no part arrived)", False), ("first scrape (every part read)", True)):
            server_ms, redis_ms = measure(registry, collector, r, args.scrapes, fresh)
            print(f"{name}: server CPU {server_ms:.2f} ms (median), Redis CPU {redis_ms:.3f} ms per scrape")
        backend.client.close()
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
