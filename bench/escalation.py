"""One hard puzzle, N workers: the wall of a broker job of one puzzle on fleets of 1, 2, 4 and 8 workers,
beside OR-Tools CP-SAT with 1, 2 and 8 workers (issue 27, item 3).

    python bench/escalation.py run [--sets frisch,q49,q64] [--fleets 1,2,4,8] [--rounds 3]
                                   [--escalate-after 0.5]
    python bench/escalation.py cpsat [--sets ...] [--workers 1,2,8]  # pip install ortools (this venv)
    python bench/escalation.py table                                  # medians, PAR-2, the targets
    python bench/escalation.py run --puzzle q49:0 --puzzle frisch:9   # named puzzles only
    python bench/escalation.py run --fleets 1,2 --share on,off        # learnt clauses shared or not

Sets (bench/hard_sets.py): `frisch` is every puzzle of gecode's frisch 25x25 set whose 1-worker
runs took more than `--frisch-over` (2) s of the busiest worker's CPU (all 18 run on 1 worker in
the first round; the rest only on those); `q49` and `q64` are the 10 evidence grids of each
(49x49 at 60% blanked, 64x64 at 75%, held apart from the training grids the shares were
learned on). Each set keeps its time limit (frisch 60 s, q49 30 s, q64 60 s); `--limit-scale F` gives
the jobs F times it on a loaded machine, and PAR-2 still cuts each run at the set's limit.

A run is a job of one puzzle (`--portfolio race`, seed 7, `--escalate-after S`) on a fleet of
W worker processes (`--concurrency 1` each) started for it; wall seconds from submit to the
record, and each worker's CPU seconds on it (main and pool process, /proc). Rounds are
interleaved: each round runs every fleet once on every puzzle, fleets alternating.

Fleets of 4 and 8 are simulated: on this machine (2 cores) their processes time-share the cores,
so the wall measures the sharing. Each worker's CPU is its own clock: with the scheduler sharing
the cores fairly, every process advances at the same rate, and the busiest worker's CPU (the
owner's: it started first) is the wall the job would take with a core per worker. For 1 and 2
workers the wall is measured (quiet machine: load printed beside every figure) and the
busiest worker's CPU printed beside it. CP-SAT runs in this process (`bench/cpsat.py`, AllDifferent
model, `num_workers` W, the set's time limit); its 8 workers time-share the 2 cores the same
way, so its simulated wall is its process CPU / 8 (measured wall printed beside).

Clause sharing (issue 34): with `share/` installed the helpers share their short learnt clauses;
`--share on,off` runs each fleet above 1 worker both ways (off: the workers' `import cadical_share`
fails, so they share refutations and units only, as before). One worker calls no helper: one run.

Records: bench/out/escalation.jsonl (appended); `table` reads the latest round of each.
"""

from __future__ import annotations

import argparse
import json
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CORPORA = Path(os.environ.get("SUDOKU_CORPORA") or REPO.parent / "shared" / "corpora")
CLI = [str(Path(sys.executable).with_name("sudoku-batch"))]
OUT = REPO / "bench" / "out" / "escalation.jsonl"
SEED = 7
SETS = ("frisch", "q49", "q64")
TARGET_OVER = 3.0  # the targets' ratios are over the puzzles 1 worker takes more than this (median wall)
TIME_LIMITS = {"frisch": 60.0, "q49": 30.0, "q64": 60.0, "qwh": 60.0}


def puzzle_text(name: str) -> str:
    """The puzzle named `frisch:I`, `qwh:S`, `SET:I` or `train-SET:I`: line I (0-based) of gecode's frisch
    set, a 36x36 grid with 60% blanked from seed S, grid I of a hard set of bench/hard_sets.py (or of
    its training set)."""
    kind, _, arg = name.partition(":")
    if kind.removeprefix("train-") in ("q36", "q49", "q64"):
        from bench.hard_sets import SETS as HARD
        from bench.hard_sets import TRAINING

        sets = TRAINING if kind.startswith("train-") else HARD
        return sets[kind.removeprefix("train-")].lines()[int(arg)]
    if kind == "frisch":
        return (CORPORA / "25x25" / "gecode_frisch_25x25.txt").read_text().split()[int(arg)]
    import numpy as np

    from solvers.generate.fill import random_grids
    from solvers.model.puzzle import Box, Puzzle

    box = Box(6, 6)
    rng = np.random.default_rng(int(arg))
    grid = random_grids(box, 1, rng)[0].copy()
    grid[rng.choice(box.cells, int(0.6 * box.cells), replace=False)] = 0
    return Puzzle(box, grid.astype(np.uint8)).render()


def set_names(name: str) -> list[str]:
    """The puzzle names of a set (frisch: all 18; `select` keeps the slow ones)."""
    count = 18 if name == "frisch" else 10
    return [f"{name}:{i}" for i in range(count)]


def limit_of(name: str) -> float:
    return TIME_LIMITS[name.partition(":")[0].removeprefix("train-")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_workers(url: str, count: int, logs: Path, share: bool = True) -> list[subprocess.Popen[bytes]]:
    """`count` workers of one process each, beating (and warm) before this returns; `share` False: their
    `import cadical_share` fails (a module of that name first on their path raises ImportError)."""
    import redis

    env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
    if not share:
        shim = logs / "no-share"
        shim.mkdir(exist_ok=True)
        (shim / "cadical_share.py").write_text('raise ImportError("bench/escalation.py --share off")\n')
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), env.get("PYTHONPATH", "")) if p)
    procs = []
    for i in range(count):
        with open(logs / f"worker{count}-{i}.log", "ab") as log:
            cmd = [*CLI, "worker", "--broker", url, "--concurrency", "1", "--loglevel", "warning"]
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
    client = redis.Redis.from_url(url)
    client.delete("sbatch:workers")
    deadline = time.monotonic() + 300
    while len(client.zrangebyscore("sbatch:workers", time.time() - 3, "+inf")) < count:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            stop(procs)
            raise SystemExit("workers did not start")
        time.sleep(0.2)
    client.close()
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def worker_cpu(procs: list[subprocess.Popen[bytes]]) -> list[float]:
    """CPU seconds so far of each worker: its main process and its pool process."""
    from bench.pipeline import pids_cpu, tree

    return [pids_cpu(tree(p.pid)) for p in procs]


def one_run(url: str, text: str, escalate_after: float, time_limit: float) -> tuple[float, dict[str, Any]]:
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


def append(rec: dict[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip()


class Server:
    """A redis-server of this bench's own, on a free port, in a temporary directory."""

    def __enter__(self) -> Server:
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-escalation-"))
        port = free_port()
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.tmp)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"redis://127.0.0.1:{port}/0"
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def fleet_runs(
    url: str, logs: Path, fleet: int, names: list[str], args: argparse.Namespace, rnd: int, share: bool = True
) -> list[dict[str, Any]]:
    """Every puzzle of `names` once on a fleet of `fleet` workers started for them (sharing learnt clauses
    or not); their records."""
    procs = start_workers(url, fleet, logs, share)
    out = []
    try:
        for name in names:
            load = os.getloadavg()[0]
            before = worker_cpu(procs)
            job_limit = limit_of(name) * args.limit_scale
            wall, record = one_run(url, puzzle_text(name), args.escalate_after, job_limit)
            cpu = [b - a for a, b in zip(before, worker_cpu(procs), strict=True)]
            rec = {
                "kind": "fleet", "puzzle": name, "set": name.partition(":")[0], "fleet": fleet, "round": rnd,
                "share": share and fleet > 1,
                "wall": round(wall, 3), "cpu": [round(c, 3) for c in cpu], "busiest": round(max(cpu), 3),
                "status": record["status"], "solver": record["solver"], "limit": limit_of(name),
                "job_limit": job_limit,
                "escalate_after": args.escalate_after, "load1": round(load, 2), "commit": commit(),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            }  # fmt: skip
            append(rec)
            out.append(rec)
            print(
                f"round {rnd} {name} on {fleet}{' sharing' * rec['share']}: {wall:.2f} s wall, "
                f"busiest CPU {max(cpu):.2f} s, "
                f"{record['status']} by {record['solver']}, load {load:.2f}",
                flush=True,
            )
    finally:
        stop(procs)
    return out


def select(names: list[str], records: list[dict[str, Any]], over: float) -> list[str]:
    """Frisch: the puzzles whose 1-worker runs took more than `over` s (the busiest worker's CPU, median)."""
    keep = []
    for name in names:
        if not name.startswith("frisch:"):
            keep.append(name)
            continue
        cpus = [r["busiest"] for r in records if r["puzzle"] == name and r["fleet"] == 1]
        if cpus and statistics.median(cpus) > over:
            keep.append(name)
    return keep


def section_run(args: argparse.Namespace) -> None:
    """Rounds of every fleet on every puzzle (frisch on fleets above 1: the slow ones only)."""
    names = args.puzzle or [n for s in args.sets.split(",") for n in set_names(s)]
    fleets = [int(f) for f in args.fleets.split(",")]
    with Server() as server:
        logs = server.tmp
        for rnd in range(1, args.rounds + 1):
            ones: list[dict[str, Any]] = []
            shares = [s == "on" for s in args.share.split(",")]
            for fleet, share in [(f, s) for f in fleets for s in (shares if f > 1 else [False])]:
                todo = (
                    names
                    if fleet == 1 or args.puzzle
                    else select(names, ones or latest_ones(), args.frisch_over)
                )
                got = fleet_runs(server.url, logs, fleet, todo, args, rnd, share)
                if fleet == 1:
                    ones = got
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def latest_ones() -> list[dict[str, Any]]:
    """The 1-worker records kept so far (selecting frisch when a round runs no 1-worker fleet)."""
    return [r for r in records() if r.get("kind") == "fleet" and r["fleet"] == 1]


def section_cpsat(args: argparse.Namespace) -> None:
    """CP-SAT with `--workers` on the same puzzles (frisch: those `run` selected), each set's time limit."""
    from bench.cpsat import solve as cpsat_solve
    from solvers.model.parse import parse_puzzle

    names = args.puzzle or [n for s in args.sets.split(",") for n in set_names(s)]
    names = select(names, latest_ones(), args.frisch_over)
    for rnd in range(1, args.rounds + 1):
        for workers in [int(w) for w in args.workers.split(",")]:
            for name in names:
                puzzle = parse_puzzle(puzzle_text(name))
                box = puzzle.box
                load = os.getloadavg()[0]
                cpu, wall = time.process_time(), time.perf_counter()
                job_limit = limit_of(name) * args.limit_scale
                out = cpsat_solve(puzzle.givens.tolist(), "int", job_limit, workers, box.rows, box.cols)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                status = "solved" if out["solved"] and out["verified"] else str(out["status"]).lower()
                rec = {
                    "kind": "cpsat", "puzzle": name, "set": name.partition(":")[0], "workers": workers,
                    "round": rnd, "wall": round(wall, 3), "cpu": round(cpu, 3), "status": status,
                    "limit": limit_of(name), "job_limit": job_limit, "load1": round(load, 2),
                    "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                }  # fmt: skip
                append(rec)
                print(
                    f"round {rnd} {name} CP-SAT {workers} workers: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                    f"{status}, load {load:.2f}",
                    flush=True,
                )


def records() -> list[dict[str, Any]]:
    return [json.loads(x) for x in OUT.read_text().splitlines()] if OUT.exists() else []


def seconds(rec: dict[str, Any], simulated: bool) -> float:
    """A run's time as PAR-2 counts it: its (simulated) wall when solved or refuted within the set's limit,
    else twice the limit (a run given a longer limit by `--limit-scale` is cut at the set's limit here)."""
    if rec["status"] not in ("solved", "unsolvable"):
        return 2 * rec["limit"]
    if rec["kind"] == "cpsat":
        took = rec["cpu"] / rec["workers"] if simulated else rec["wall"]
    else:
        took = rec["busiest"] if simulated else rec["wall"]
    return took if took <= rec["limit"] else 2 * rec["limit"]


def print_ratios(sname: str, label: str, one: tuple[Any, ...], more: tuple[Any, ...]) -> None:
    """A fleet against 1 worker: the ratio of the set's medians, then the targets' figure: the median of
    each puzzle's ratio over the puzzles 1 worker takes more than `TARGET_OVER` s (in wall up to 2 workers,
    above in the busiest worker's CPU)."""
    wall = statistics.median(more[0]) / statistics.median(one[0])
    cpu = statistics.median(more[1]) / statistics.median(one[1])
    print(f"  {sname}: {label} / 1 worker: median wall x{wall:.2f}, busiest CPU x{cpu:.2f}")
    simulated = int(label.split()[0]) > 2
    col = 1 if simulated else 0
    hard = [i for i, w in enumerate(one[col]) if w > TARGET_OVER]
    if hard:
        ratio = statistics.median(more[col][i] / one[col][i] for i in hard)  # the issue's: of each puzzle's
        print(
            f"  {sname}: {label} / 1 worker over the {len(hard)} puzzles 1 worker takes more than "
            f"{TARGET_OVER:.0f} s: median ratio of {'busiest CPU' if simulated else 'wall'} x{ratio:.2f} "
            f"(target <= {0.35 if simulated else 0.6})"
        )


def section_table(args: argparse.Namespace) -> None:
    """Per set: each fleet's and CP-SAT's median over the set's puzzles (each puzzle: the median of its
    rounds), PAR-2, solved, the load; the targets."""
    recs = records()
    fleets = sorted({r["fleet"] for r in recs if r.get("kind") == "fleet"})
    workers = sorted({r["workers"] for r in recs if r.get("kind") == "cpsat"})
    print("| set | config | solved | median wall s | median busiest CPU s | PAR-2 s | load |")
    print("|---|---|---|---|---|---|---|")
    for sname in SETS:
        ones = [r for r in recs if r.get("kind") == "fleet" and r["set"] == sname and r["fleet"] == 1]
        names = sorted(select(sorted({r["puzzle"] for r in ones}), ones, args.frisch_over))
        if not names:
            continue
        rows: dict[str, tuple[list[float], list[float], int, list[float], float]] = {}
        fleet_recs = [r for r in recs if r.get("kind") == "fleet"]
        configs = [
            (
                f"{f} worker{'s' * (f > 1)}{' sharing' * on}",
                [r for r in fleet_recs if r["fleet"] == f and r.get("share", False) == on],
            )
            for f in fleets
            for on in (False, True)
            if any(r["fleet"] == f and r.get("share", False) == on for r in fleet_recs)
        ]
        configs += [
            (f"CP-SAT {w}", [r for r in recs if r.get("kind") == "cpsat" and r["workers"] == w])
            for w in workers
        ]
        for label, sub in configs:
            per = [[r for r in sub if r["puzzle"] == n] for n in names]
            if any(not p for p in per):
                continue
            walls = [statistics.median(seconds(r, False) for r in p) for p in per]
            sims = [statistics.median(seconds(r, True) for r in p) for p in per]
            ok = sum(
                statistics.median([r["status"] in ("solved", "unsolvable") for r in p]) >= 0.5 for p in per
            )
            loads = [r["load1"] for p in per for r in p]
            rows[label] = (walls, sims, ok, loads, statistics.mean(walls))
            print(
                f"| {sname} ({len(names)}) | {label} | {ok}/{len(names)} | {statistics.median(walls):.2f} "
                f"| {statistics.median(sims):.2f} | {statistics.mean(walls):.1f} / "
                f"{statistics.mean(sims):.1f} | {min(loads):.1f}-{max(loads):.1f} |"
            )
        one = rows.get("1 worker")
        for label, more in rows.items():
            if one and label != "1 worker" and not label.startswith("CP-SAT"):
                print_ratios(sname, label, one, more)
        two = rows.get("2 workers sharing") or rows.get("2 workers")
        cp2 = rows.get("CP-SAT 2")
        if two and cp2:
            print(f"  {sname}: PAR-2 2 workers / CP-SAT 2 workers x{two[4] / cp2[4]:.2f} (target <= 0.5)")
        cp1 = rows.get("CP-SAT 1")
        if one and cp1:
            print(f"  {sname}: PAR-2 1 worker / CP-SAT 1 worker x{one[4] / cp1[4]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("section", choices=("run", "cpsat", "table"))
    ap.add_argument("--puzzle", action="append", help="run these puzzles only (repeat)")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--fleets", default="1,2,4,8")
    ap.add_argument("--workers", default="1,2,8", help="cpsat: its num_workers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--share", default="on,off", help="fleets above 1 worker: share learnt clauses (on, off)")
    ap.add_argument("--escalate-after", type=float, default=0.5)
    ap.add_argument(
        "--limit-scale", type=float, default=1.0,
        help="give each job this many times its set's limit (a loaded machine: the wall limit would cut runs "
        "at a fraction of their CPU); PAR-2 still cuts at the set's limit, in wall or busiest CPU",
    )  # fmt: skip
    ap.add_argument("--frisch-over", type=float, default=2.0)
    ap.add_argument(
        "--out", type=Path, default=OUT, help="the records' file (default bench/out/escalation.jsonl)"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed bench stops its server and workers too
    if args.out is not None:
        globals()["OUT"] = args.out
    {"run": section_run, "cpsat": section_cpsat, "table": section_table}[args.section](args)


if __name__ == "__main__":
    main()
