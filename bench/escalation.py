"""One hard puzzle across the fleet: its wall time as a broker job on 1 and on 2 workers (issue 16, item 3).

    python bench/escalation.py [--puzzle frisch:15 | qwh:2 | q64:0 ...] [--runs 3] [--escalate-after 2]

A job holding one hard puzzle (`--portfolio race`, a fixed `seed`, so every run starts the
same search) runs on 1 worker process, then on 2 (`--concurrency 1` each); with 2, the
puzzle unsolved after `--escalate-after` s is raced by the idle worker too, with another
seed and search order. Wall time from submit to the record, median of `--runs`,
the runs alternating between the two fleets (the machine is shared: noise hits both).
Beside it, the CPU seconds each worker (with its pool process) spent on the job: on a
machine whose cores are taken by others the wall time mostly measures the others, while
the busiest worker's CPU is the wall the job would take with a free core per worker.
Puzzles: `frisch:I` is line I (0-based) of gecode's frisch 25x25 set in the shared
corpora; `qwh:S` a 36x36 grid with 60% of its cells blanked, made from seed S here;
`q36:I`, `q49:I`, `q64:I` grid I of that hard set of bench/hard_sets.py (`train-q64:I`:
of its training set). Several `--puzzle` options are measured in turn.
The load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CORPORA = Path(os.environ.get("SUDOKU_CORPORA") or REPO.parent / "shared" / "corpora")
CLI = [str(Path(sys.executable).with_name("sudoku-batch"))]
SEED = 7


def puzzle_text(name: str) -> str:
    """The puzzle named `frisch:I`, `qwh:S`, `SET:I` or `train-SET:I` (see the module docstring)."""
    kind, _, arg = name.partition(":")
    if kind.removeprefix("train-") in ("q36", "q49", "q64"):
        from bench.hard_sets import SETS, TRAINING

        sets = TRAINING if kind.startswith("train-") else SETS
        return sets[kind.removeprefix("train-")].lines()[int(arg)]
    if kind == "frisch":
        return (CORPORA / "25x25" / "gecode_frisch_25x25.txt").read_text().split()[int(arg)]
    import numpy as np

    from solvers.fill import random_grids
    from solvers.puzzle import Box, Puzzle

    box = Box(6, 6)
    rng = np.random.default_rng(int(arg))
    grid = random_grids(box, 1, rng)[0].copy()
    grid[rng.choice(box.cells, int(0.6 * box.cells), replace=False)] = 0
    return Puzzle(box, grid.astype(np.uint8)).render()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_workers(url: str, count: int, logs: Path) -> list[subprocess.Popen]:
    """`count` workers of one process each, beating (and warm) before this returns."""
    import redis

    env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
    procs = []
    for i in range(count):
        log = open(logs / f"worker{count}-{i}.log", "wb")  # noqa: SIM115 - the process holds it
        cmd = [*CLI, "worker", "--broker", url, "--concurrency", "1", "--loglevel", "warning"]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
    client = redis.Redis.from_url(url)
    client.delete("sbatch:workers")
    deadline = time.monotonic() + 180
    while len(client.zrangebyscore("sbatch:workers", time.time() - 3, "+inf")) < count:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            stop(procs)
            raise SystemExit("workers did not start")
        time.sleep(0.2)
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def worker_cpu(procs: list[subprocess.Popen]) -> list[float]:
    """CPU seconds so far of each worker: its main process and its pool process."""
    from bench.pipeline import pids_cpu, tree

    return [pids_cpu(tree(p.pid)) for p in procs]


def one_run(url: str, text: str, escalate_after: float, time_limit: float) -> tuple[float, dict]:
    """Wall seconds from submit to the record, and the record."""
    from client.batch import BatchClient

    client = BatchClient(url)
    t0 = time.perf_counter()
    job = client.submit(
        [text], portfolio="race", seed=SEED, escalate_after=escalate_after, time_limit=time_limit
    )
    (record,) = [r.to_dict() for r in job.results()]
    wall = time.perf_counter() - t0
    job.purge()
    client.close()
    return wall, record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--puzzle", action="append", help="repeat for several (default frisch:15, or qwh:2)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--escalate-after", type=float, default=2.0)
    ap.add_argument("--time-limit", type=float, default=120.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed bench stops its server and workers too
    names = args.puzzle or ["frisch:15" if (CORPORA / "25x25").exists() else "qwh:2"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-escalation-"))
    port = free_port()
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        time.sleep(0.5)
        for name in names:
            measure(url, tmp, name, args)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def measure(url: str, tmp: Path, name: str, args: argparse.Namespace) -> None:
    """One puzzle's runs on 1 and on 2 workers, alternating; print each run and the medians."""
    text = puzzle_text(name)
    walls: dict[int, list[float]] = {1: [], 2: []}
    busiest: dict[int, list[float]] = {1: [], 2: []}
    for run in range(args.runs):
        for count in (1, 2):
            procs = start_workers(url, count, tmp)
            try:
                load = os.getloadavg()[0]
                before = worker_cpu(procs)
                wall, record = one_run(url, text, args.escalate_after, args.time_limit)
                cpu = [b - a for a, b in zip(before, worker_cpu(procs), strict=True)]
            finally:
                stop(procs)
            walls[count].append(wall)
            busiest[count].append(max(cpu))
            print(
                f"{name} run {run + 1}, {count} worker(s): {wall:.2f} s wall, {record['status']} by "
                f"{record['solver']}, worker CPU {' + '.join(f'{c:.2f}' for c in cpu)} s, "
                f"load {load:.2f}",
                flush=True,
            )
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(f"{name}: median wall 1 worker {one:.2f} s, 2 workers {two:.2f} s: x{two / one:.2f}", flush=True)
    one, two = statistics.median(busiest[1]), statistics.median(busiest[2])
    print(f"{name}: median CPU of the busiest worker 1: {one:.2f} s, 2: {two:.2f} s: x{two / one:.2f}")


if __name__ == "__main__":
    main()
