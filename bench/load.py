"""Load: a 1,000,000-puzzle job through `solve --broker` with 2 workers; client peak RSS and Redis memory.

Starts its own redis-server (AOF on, everysec) on a free port and two `sudoku-batch worker
--concurrency 1` processes, builds the input by repeating the 9x9 corpora, runs the
client as a child process and reports its peak RSS and CPU (wait4 rusage), Redis's
`used_memory` sampled every 0.2 s and `used_memory_peak`, the longest queue, and the wall
time. Every process it starts is stopped by pid at the end.

    .venv/bin/python bench/load.py                  # 1,000,000 puzzles
    .venv/bin/python bench/load.py --puzzles 100000 --json bench/out/load_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO.parent / "shared" / "corpora" / "9x9"
SOURCES = ["kaggle_bryanpark_first20000.txt", "tdoku_puzzles2_17_clue.txt", "norvig_sudoku10k.txt"]


def cli() -> list[str]:
    """The `sudoku-batch` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("sudoku-batch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "client.cli"]


def free_port() -> int:
    """A free TCP port on the loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_input(path: Path, count: int) -> dict[str, int]:
    """Write `count` puzzles, cycling through the corpora; return how many came from each."""
    lines: list[tuple[str, list[str]]] = []
    for name in SOURCES:
        source = CORPORA / name
        if source.exists():
            lines.append((name, [x for x in source.read_text().splitlines() if x and not x.startswith("#")]))
    if not lines:
        lines.append(("sample.txt", (REPO / "client" / "samples" / "sample.txt").read_text().splitlines()))
    used = {name: 0 for name, _ in lines}
    written = 0
    with path.open("w") as out:
        while written < count:
            for name, texts in lines:
                take = texts[: count - written]
                out.write("\n".join(take) + "\n")
                used[name] += len(take)
                written += len(take)
                if written >= count:
                    break
    return used


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process this script started (TERM, then KILL)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main() -> int:
    """Run the load test and print (and optionally save) the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--puzzles", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=str(REPO / "bench" / "out" / "load.json"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sbatch-load-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        corpus = work / "input.txt"
        used = build_input(corpus, args.puzzles)
        port = free_port()
        url = f"redis://127.0.0.1:{port}/0"
        procs.append(
            subprocess.Popen(
                [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1"]
                + ["--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(work)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
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
        env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
        for i in range(args.workers):
            with (work / f"worker{i}.log").open("wb") as log:
                cmd = [*cli(), "worker", "--broker", url, "--concurrency", "1"]
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
        while len(r.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < args.workers:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker or redis-server exited")
            time.sleep(0.2)
        r.config_resetstat()
        base_memory = int(r.info("memory")["used_memory"])
        samples = {"used_memory_max": base_memory, "queue_max": 0}
        done = threading.Event()

        def sample() -> None:
            probe = redis.Redis.from_url(url)
            while not done.is_set():
                try:
                    samples["used_memory_max"] = max(
                        samples["used_memory_max"], int(probe.info("memory")["used_memory"])
                    )
                    samples["queue_max"] = max(samples["queue_max"], int(probe.llen("sudoku_batch")))
                except redis.RedisError:
                    pass
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out = work / "results.jsonl"
        start = time.perf_counter()
        client = subprocess.Popen(
            [*cli(), "solve", str(corpus), "--broker", url, "-o", str(out), "-q"], env=env
        )
        _, status, usage = os.wait4(client.pid, 0)
        client.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        done.set()
        sampler.join(2)
        memory = r.info("memory")
        with out.open("rb") as f:
            records = sum(1 for _ in f)
        figures = {
            "puzzles": args.puzzles,
            "inputs": used,
            "workers": args.workers,
            "exit_code": client.returncode,
            "records": records,
            "wall_s": round(wall, 1),
            "client_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "redis_used_memory_before_mb": round(base_memory / 2**20, 1),
            "redis_used_memory_max_sampled_mb": round(samples["used_memory_max"] / 2**20, 1),
            "redis_used_memory_peak_mb": round(int(memory["used_memory_peak"]) / 2**20, 1),
            "queue_max_messages": samples["queue_max"],
            "output_mb": round(out.stat().st_size / 2**20, 1),
            "puzzles_per_s": round(args.puzzles / wall),
            "cpus": len(os.sched_getaffinity(0)),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(figures, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        return 0 if client.returncode == 0 and records == args.puzzles else 1
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
