"""Fair share: a small job's wall time alone and 2 s into a long job, with and without --priority high.

Starts its own redis-server on a free port and two `sudoku-batch worker --concurrency 1`
processes of the sudoku-batch in `--repo` (default: this tree), then runs rounds of three cases
in rotating order: the small job alone; 2 s into a long `solve` of forum-hardest puzzles (repeated
to `--big` lines) at the default priority; the same with `--priority high` (left out for a tree
without it: `--no-high`). The long job is interrupted (cancelled) once the small one ends, and the
queue and workers drain before the next case. Prints each wall time and the medians; every process
it starts is stopped by pid at the end.

    .venv/bin/python bench/fair_share.py --rounds 3
    .venv/bin/python bench/fair_share.py --repo ../../main --no-high     # the tree before the change
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path(os.environ.get("SUDOKU_CORPORA") or REPO.parent / "shared" / "corpora") / "9x9"
STARTED: list[subprocess.Popen[bytes]] = []  # every process started here, stopped at the end
SMALL = "tdoku_puzzles2_17_clue.txt"
BIG = "tdoku_puzzles5_forum_hardest_1905_11plus.txt"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ping(r: redis.Redis) -> bool:
    """True once the server answers."""
    try:
        return bool(r.ping())
    except redis.ConnectionError:
        return False


def build(tmp: Path, small: int, big: int) -> tuple[Path, Path]:
    """The small input (the first `small` 17-clue puzzles) and the long one (forum-hardest to `big` lines)."""
    small_path, big_path = tmp / "small.txt", tmp / "big.txt"
    small_path.write_text("\n".join((CORPORA / SMALL).read_text().splitlines()[:small]) + "\n")
    hard = (CORPORA / BIG).read_text().splitlines()
    big_path.write_text("\n".join((hard * (big // len(hard) + 1))[:big]) + "\n")
    return small_path, big_path


def idle(r: redis.Redis) -> None:
    """Wait until no chunk is queued, held or running (the previous case drained)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        lists = [k for k in r.scan_iter("sudoku_batch*")]
        if not any(r.llen(k) for k in lists) and not r.hlen("unacked") and not r.hlen("sbatch:current"):
            return
        time.sleep(0.2)
    raise SystemExit("the workers did not drain within 300 s")


class Watch(threading.Thread):
    """Polls Redis every 10 ms for the small job's first chunk: when it was committed to the outbox (sent)
    and when a worker took it (its delivery record), in epoch seconds."""

    def __init__(self, url: str, small: Path) -> None:
        super().__init__(daemon=True)
        self.r = redis.Redis.from_url(url)
        self.name_ = str(small)
        self.sent: float | None = None
        self.taken: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        job = None
        while not self.stop.is_set() and self.taken is None:
            if job is None:
                for key in self.r.scan_iter("sbatch:job:*:meta"):
                    if self.r.hget(key, "inputs") == self.name_.encode():
                        job = key.decode().split(":")[2]
            if job is not None:
                raw = self.r.hget(f"sbatch:job:{job}:outbox", "0")
                if raw is not None and self.sent is None:  # `{"at": <epoch s>, "task": ...}`
                    self.sent = float(raw[: raw.index(b",")].split(b":")[1])
                held = self.r.hget("sbatch:deliveries", f"{job}:0")
                if held is not None:
                    self.taken = float(held.decode().rpartition("|")[2])
            time.sleep(0.01)


def run_case(
    cmd: list[str], url: str, small: Path, big: Path | None, high: bool, tmp: Path
) -> tuple[float, float]:
    """The small job's wall seconds (`solve` to exit) and its client's CPU seconds, 2 s into a long `solve`
    when `big` is given."""
    long_job = None
    if big is not None:
        long_job = subprocess.Popen(
            [*cmd, "solve", str(big), "--broker", url, "-o", str(tmp / "big.jsonl"), "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        STARTED.append(long_job)
        time.sleep(2.0)
    args = ["--priority", "high"] if high else []
    watch = Watch(url, small)
    watch.start()
    start, epoch = time.monotonic(), time.time()
    proc = subprocess.Popen(
        [*cmd, "solve", str(small), "--broker", url, "-o", str(tmp / "small.jsonl"), "-q", *args],
        stdout=subprocess.DEVNULL,
    )
    STARTED.append(proc)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    watch.stop.set()
    watch.join()
    if watch.sent is not None and watch.taken is not None:
        sent, taken = watch.sent - epoch, watch.taken - watch.sent
        print(f"  its chunk sent {sent:.2f} s after the start, taken {taken:.2f} s later", flush=True)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"the small job failed: exit {proc.returncode}")
    if long_job is not None:
        long_job.send_signal(signal.SIGINT)  # the long job is cancelled: its queued chunks are dropped
        long_job.wait(60)
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", type=Path, default=REPO, help="the sudoku-batch tree (its .venv) to run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--small", type=int, default=1000)
    p.add_argument("--big", type=int, default=400_000)
    p.add_argument("--no-high", action="store_true", help="a tree without --priority")
    p.add_argument(
        "--worker-nice", type=int, default=0, help="run the workers N nicer (the clients first for the "
        "CPU, as when they run on other machines)",
    )  # fmt: skip
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    cmd = [str(a.repo.resolve() / ".venv" / "bin" / "sudoku-batch")]
    cases = ["alone", "normal"] + ([] if a.no_high else ["high"])
    walls: dict[str, list[float]] = {c: [] for c in cases}
    cpus: dict[str, list[float]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="fair-") as name:
        tmp = Path(name)
        small, big = build(tmp, a.small, a.big)
        port = free_port()
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", name],
            stdout=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
        workers = []
        try:
            r = redis.Redis.from_url(url)
            while not ping(r):
                time.sleep(0.05)
            for i in range(2):
                log = open(tmp / f"worker{i}.log", "wb")  # noqa: SIM115 - the worker's, for its life
                workers.append(
                    subprocess.Popen(
                        [*cmd, "worker", "--broker", url, "--concurrency", "1"],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        cwd=a.repo,
                        preexec_fn=lambda: os.nice(a.worker_nice),
                    )  # fmt: skip
                )
            while len(r.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < 2:
                time.sleep(0.2)
            for n in range(a.rounds):
                for case in cases[n % len(cases) :] + cases[: n % len(cases)]:  # rotating order
                    idle(r)
                    wall, cpu = run_case(
                        cmd, url, small, None if case == "alone" else big, case == "high", tmp
                    )
                    walls[case].append(wall)
                    cpus[case].append(cpu)
                    load = os.getloadavg()[0]
                    print(
                        f"round {n + 1} {case}: {wall:.2f} s, client CPU {cpu:.2f} s (load {load:.1f})",
                        flush=True,
                    )
        finally:
            for proc in [*STARTED, *workers, server]:
                if proc.returncode is None and proc.poll() is None:
                    proc.terminate()
                    proc.wait(30)
    alone = statistics.median(walls["alone"])
    out = {c: {"walls": walls[c], "median": statistics.median(walls[c]), "cpus": cpus[c]} for c in cases}
    for c in cases:
        wall, cpu = statistics.median(walls[c]), statistics.median(cpus[c])
        print(f"{c}: median {wall:.2f} s, x{wall / alone:.2f} alone, client CPU {cpu:.2f} s")
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
