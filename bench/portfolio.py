"""Evidence for the stochastic solvers and the racing portfolio.

Sections (run one or several; each writes bench/out/portfolio_<section>.jsonl, one record
per solve, appended as it goes so a long run keeps what it measured):

    demo        evolution alone on the seed article's demo puzzle, 10 seeds
    stochastic  each stochastic solver alone on 50 norvig_top95 + 50 krazydad IM puzzles
    large       the hard sets of bench/hard_sets.py (frisch 25x25 at 60 s, 24 36x36 with 55-62%
                of the cells blanked at 20 s, 10 49x49 at 60% at 30 s, 10 64x64 at 75% at 60 s;
                acs25 on request): the race vs each member alone, `plain` (the exact solver
                without restarts) and `cpsat` (OR-Tools CP-SAT, one worker: `pip install
                ortools`); stochastic members alone (they solve no grid from 25x25) may run on
                a documented subset (`--stochastic-subset`); `--train` runs the training sets
    table       per set and config: solved, median and max CPU, PAR-2, load; the issue's targets
    learn       the race's shares per grid size from the `--train` records (solvers/shares.py);
                `--sets` learns those sets' sides only
    throughput  9x9 corpora through solve_many: portfolio `race` vs `fast` (CPU time)
    calibrate   measured cost per exact node, SAT conflicts per slice and per stochastic work
                unit vs the models
    plot        cactus plot (puzzles solved vs CPU time) of `large` and `stochastic` records

    .venv/bin/python bench/portfolio.py demo stochastic --time-limit 10
    .venv/bin/python bench/portfolio.py large --train --configs propagation,sat,sat-focused
    .venv/bin/python bench/portfolio.py learn
    .venv/bin/python bench/portfolio.py large --shard 0/2 --append &   # one process per core
    .venv/bin/python bench/portfolio.py large --shard 1/2 --append
    .venv/bin/python bench/portfolio.py large --configs annealing,evolution --stochastic-subset frisch=2
    .venv/bin/python bench/portfolio.py table plot

Times are wall seconds of the solve and CPU seconds of this process around it (the race
runs in one thread, so CPU time is the work done; the machine may be shared).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solvers.api import solve_many  # noqa: E402
from solvers.exact import EXACT_SOLVERS  # noqa: E402
from solvers.model.parse import parse_puzzle  # noqa: E402
from solvers.model.puzzle import Box, Puzzle  # noqa: E402
from solvers.model.result import SolveResult, Status  # noqa: E402
from solvers.race.members import exact_ns_per_node  # noqa: E402
from solvers.race.portfolio import PRESETS, PortfolioSpec, race  # noqa: E402
from solvers.stochastic import STOCHASTIC_SOLVERS  # noqa: E402
from solvers.stochastic.base import WORK_NS  # noqa: E402

CORPORA = Path(os.environ.get("SUDOKU_CORPORA", ROOT.parent / "shared" / "corpora"))
OUT = ROOT / "bench" / "out"
DEMO = "..62...8...897......481.5......6...2.7.....3.6...5......2.471....3.284...5...12.."


def lines(rel: str, count: int | None = None, step: int = 1) -> list[str]:
    """Read puzzle lines of a corpus file: every `step`-th, at most `count`."""
    with open(CORPORA / rel) as f:
        out = [ln.strip() for ln in f if ln.strip()][::step]
    return out[:count] if count else out


def krazydad(level: str, count: int) -> list[str]:
    """Return the first `count` krazydad 9x9 puzzles of a difficulty level (IM = medium)."""
    meta = (CORPORA / "9x9/krazydad_sudoku_112k.meta.tsv").read_text().splitlines()[1:]
    keep = [i for i, row in enumerate(meta) if row.split("\t")[0] == level][:count]
    all_lines = lines("9x9/krazydad_sudoku_112k.txt")
    return [all_lines[i] for i in keep]


def kernel_version() -> str:
    """Return a short hash of the exact kernels' sources: records of different kernel
    versions must not be compared (the exact solvers are still being tuned)."""
    src = b"".join(p.read_bytes() for p in sorted((ROOT / "solvers" / "exact").glob("*.py")))
    return hashlib.sha1(src).hexdigest()[:10]


KERNEL = kernel_version()


def record(path: Path, rec: dict[str, Any]) -> None:
    """Append one JSON record (tagged with the exact kernels' version) to a results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps({"kernel": KERNEL, **rec}) + "\n")


def timed(fn: Any) -> tuple[SolveResult, float, float]:
    """Run fn(); return its result, wall seconds and CPU seconds."""
    w, c = time.perf_counter(), time.process_time()
    r = fn()
    return r, time.perf_counter() - w, time.process_time() - c


def summary_of(r: SolveResult) -> dict[str, Any]:
    """The fields of a result the evidence needs."""
    return {
        "status": r.status.value,
        "cost": r.cost,
        "solver": r.solver,
        "elapsed": r.elapsed,
        "counters": r.counters,
    }


def section_demo(args: argparse.Namespace) -> None:
    """Evolution alone (article defaults) on the demo puzzle over 10 seeds."""
    path = OUT / "portfolio_demo.jsonl"
    path.unlink(missing_ok=True)
    puzzle = parse_puzzle(DEMO)
    evo = STOCHASTIC_SOLVERS["evolution"]
    evo.solve(puzzle, time_limit=1, seed=99)  # load the compiled kernels
    walls, cpus, solved = [], [], 0
    for seed in range(10):
        r, wall, cpu = timed(lambda s=seed: evo.solve(puzzle, time_limit=args.time_limit, seed=s))
        record(path, {"seed": seed, "wall": wall, "cpu": cpu, **summary_of(r)})
        solved += r.status == "solved"
        if r.status == "solved":
            walls.append(wall)
            cpus.append(cpu)
        print(f"demo seed {seed}: {r.status} cost {r.cost} wall {wall:.2f}s cpu {cpu:.2f}s", flush=True)
    if walls:
        print(
            f"evolution on the demo: {solved}/10 solved; median wall {statistics.median(walls):.2f}s, "
            f"median CPU {statistics.median(cpus):.2f}s (of the solved)"
        )


def section_stochastic(args: argparse.Namespace) -> None:
    """Each stochastic solver alone on 50 top95 + 50 krazydad medium (IM) puzzles."""
    path = OUT / "portfolio_stochastic.jsonl"
    if not args.append:
        path.unlink(missing_ok=True)
    params = {"propagate": False} if args.no_propagate else {}
    suffix = "-nopropagate" if args.no_propagate else ""
    half = args.count // 2
    puzzles = [("norvig_top95", t) for t in lines("9x9/norvig_top95.txt", half)]
    puzzles += [("krazydad_IM", t) for t in krazydad("IM", args.count - half)]
    puzzles = [p for p in puzzles if p[0] in args.corpora.split(",")] if args.corpora else puzzles
    names = args.solvers.split(",") if args.solvers else sorted(STOCHASTIC_SOLVERS)
    for name in names:
        solver = STOCHASTIC_SOLVERS[name]
        solver.solve(parse_puzzle(DEMO), time_limit=0.5, seed=0)
        costs: list[int] = []
        solved = 0
        for i, (corpus, text) in enumerate(puzzles):
            r, wall, cpu = timed(
                lambda t=text, s=i, sv=solver: sv.solve(
                    parse_puzzle(t), time_limit=args.time_limit, seed=s, params=params
                )
            )
            record(
                path,
                {
                    "config": name + suffix,
                    "corpus": corpus,
                    "index": i,
                    "wall": wall,
                    "cpu": cpu,
                    **summary_of(r),
                },
            )
            solved += r.status == "solved"
            if r.status != "solved":
                costs.append(int(r.cost or 0))
        hist = {c: costs.count(c) for c in sorted(set(costs))}
        print(
            f"{name}{suffix}: {solved}/{len(puzzles)} solved within {args.time_limit}s; "
            f"costs of the rest {hist}",
            flush=True,
        )


def large_configs() -> dict[str, PortfolioSpec | str | None]:
    """The race portfolio, each of its members alone (same member settings), `plain` (None:
    the exact solver without restarts) and `cpsat` (OR-Tools CP-SAT, one worker)."""
    race_spec = PRESETS["race"]
    configs: dict[str, PortfolioSpec | str | None] = {"race": race_spec}
    for m in race_spec.members:
        configs[m.solver] = PortfolioSpec(name=m.solver, members=(m,))
    return {**configs, "plain": None, "cpsat": "cpsat"}


def run_cpsat(puzzle: Puzzle, time_limit: float, on_solver: Any = None) -> SolveResult:
    """OR-Tools CP-SAT, one worker, AllDifferent model (bench/cpsat.py), checked by our verifier."""
    from bench.cpsat import solve as cpsat_solve

    box = puzzle.box
    out = cpsat_solve(puzzle.givens.tolist(), "int", time_limit, 1, box.rows, box.cols, on_solver)
    if not out["solved"]:
        return SolveResult(Status.TIMEOUT, solver="cpsat", error=str(out["status"]))
    if not out["verified"]:
        return SolveResult(Status.ERROR, solver="cpsat", error="CP-SAT grid rejected")
    return SolveResult(
        Status.SOLVED, solver="cpsat", cost=0, counters={"cpsat": {"conflicts": out["conflicts"]}}
    )


def run_config(
    spec: PortfolioSpec | str | None, puzzle: Puzzle, time_limit: float, cpu_limit: float | None = None
) -> SolveResult:
    """Race `spec` (seed 0, as `solve` does), run CP-SAT (`"cpsat"`), or (None: config `plain`)
    the plain exact solver, no restarts; `cpu_limit`: also stop the race or CP-SAT once this
    process has spent that many CPU seconds on it (`CpuWatch`; `time_limit` is wall clock)."""
    if spec is None:
        return solve_many([puzzle], portfolio="fast", time_limit=time_limit)[0]
    with CpuWatch(cpu_limit) as watch:
        if isinstance(spec, str):
            return run_cpsat(puzzle, time_limit, watch.hold)
        return race(puzzle, spec, time_limit=time_limit, seed=0, stop=watch.stop)


class CpuWatch:
    """Raise a race's stop flag, or stop a CP-SAT search, once this process has spent `limit`
    CPU seconds since entering (None: never). Why: the race's and CP-SAT's deadlines are wall
    clock; on a loaded machine a wall deadline gives a run less CPU than its limit, and on an
    idle one a generous wall deadline more: counting CPU makes a timeout mean the same everywhere."""

    POLL = 0.01  # seconds between looks at the CPU clock

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.stop = np.zeros(1, dtype=np.int64)
        self.cpsat: Any = None
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def hold(self, solver: Any) -> None:
        """Keep the CP-SAT solver to stop (bench/cpsat.py calls this before its search)."""
        self.cpsat = solver

    def __enter__(self) -> CpuWatch:
        if self.limit is not None:
            start = time.process_time()
            self.thread = threading.Thread(target=self._watch, args=(start + self.limit,), daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()

    def _watch(self, until: float) -> None:
        """Poll the process's CPU clock; raise the stop when it passes `until`."""
        while not self.done.wait(self.POLL):
            if time.process_time() >= until:
                self.stop[0] = 1
                if self.cpsat is not None:
                    self.cpsat.stop_search()
                return


def large_path(train: bool) -> Path:
    """The records of the evidence runs, or of the training runs (`learn` reads those)."""
    return OUT / ("portfolio_train.jsonl" if train else "portfolio_large.jsonl")


def section_large(args: argparse.Namespace) -> None:
    """The hard sets (bench/hard_sets.py: frisch, acs25, q36, q49, q64): the race vs each
    member alone, the plain exact solver and CP-SAT with one worker, puzzle by puzzle (all
    configs on a puzzle in turn, so they meet the same load on a shared machine); each set at
    its own CPU time limit unless `--time-limit` is given. Each run gets `--wall-factor` times the
    limit in wall time (the race's deadline and CP-SAT's are wall clock) and counts as
    solved only within the CPU limit. CPU seconds of this process per puzzle."""
    from bench.hard_sets import SETS, TRAINING
    from bench.learn_shares import conclusive
    from bench.learn_shares import solved as in_limit

    path = large_path(args.train)
    registry = TRAINING if args.train else SETS
    names = args.sets.split(",") if args.sets else ["frisch", "q36", "q49", "q64"]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise SystemExit(f"unknown set {unknown[0]!r}; sets: {', '.join(registry)}")
    configs = large_configs()
    default = ["race", "propagation", "sat", "sat-rows", "sat-plain", "cpsat"]
    chosen = args.configs.split(",") if args.configs else default
    if "cpsat" in chosen and importlib.util.find_spec("ortools") is None:
        if args.configs:
            raise SystemExit("config cpsat needs OR-Tools: pip install ortools (the bench only)")
        chosen.remove("cpsat")
        print("cpsat left out: OR-Tools is not installed (pip install ortools)", flush=True)
    unknown_configs = [c for c in chosen if c not in configs]
    if unknown_configs:
        raise SystemExit(f"unknown config {unknown_configs[0]!r}; configs: {', '.join(configs)}")
    if not args.append:  # only once the request is known good: the records are hours of runs
        path.unlink(missing_ok=True)
    subset = stochastic_subset(args.stochastic_subset)
    shard, shards = (int(x) for x in args.shard.split("/"))
    shard_note = f" (shard {shard}/{shards})" if shards > 1 else ""
    done: set[tuple[str, str, int]] = set()
    if (args.unsolved_only or args.resume) and path.exists():
        earlier = latest([json.loads(x) for x in path.read_text().splitlines()], ("set", "config"))
        keep = in_limit if args.unsolved_only else conclusive
        done = {(r["set"], r["config"], r["index"]) for r in earlier if keep(r)}
    for sname in names:
        bench_set = registry[sname]
        texts = bench_set.lines()
        limit = args.time_limit if args.time_limit is not None else bench_set.time_limit
        wall = limit * args.wall_factor
        counts = {}
        for cname in chosen:
            spec = configs[cname]
            stochastic_only = isinstance(spec, PortfolioSpec) and all(
                m.kind == "stochastic" for m in spec.members
            )
            counts[cname] = subset.get(sname, len(texts)) if stochastic_only else len(texts)
            run_config(spec, parse_puzzle(texts[0]), 0.1)  # load kernels
        tally: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in chosen}  # CPU solved, loads
        for i, text in enumerate(texts):  # puzzle by puzzle, every config in turn: the same load for each
            if i % shards != shard:
                continue
            puzzle = parse_puzzle(text)
            for cname in chosen:
                if i >= counts[cname] or (sname, cname, i) in done:
                    continue
                spec = configs[cname]
                r, took, cpu = timed(lambda p=puzzle, sp=spec, w=wall, c=limit: run_config(sp, p, w, c))
                load = os.getloadavg()[0]
                rec = {"config": cname, "set": sname, "index": i, "limit": limit, "wall": took, "cpu": cpu}
                rec = {**rec, "wall_limit": wall, "load1": load, "train": args.train, **summary_of(r)}
                record(path, rec)
                tally[cname][1].append(load)
                if in_limit(rec):
                    tally[cname][0].append(cpu)
                print(
                    f"  {cname} {sname}#{i}: {r.status} by {r.solver} cost {r.cost} wall {took:.2f}s "
                    f"cpu {cpu:.2f}s load {load:.2f}",
                    flush=True,
                )
        for cname, (cpus, loads) in tally.items():
            count = counts[cname]
            note = f" (documented subset: the first {count} of {len(texts)})" if count < len(texts) else ""
            stats = f"CPU median {statistics.median(cpus):.2f}s max {max(cpus):.2f}s" if cpus else "-"
            print(
                f"{cname} on {sname}{shard_note}: {len(cpus)}/{len(loads)} run solved within "
                f"{limit}s{note}; {stats}; load average (1 min) {statistics.mean(loads or [0]):.2f} mean",
                flush=True,
            )


def section_table(args: argparse.Namespace) -> None:
    """Per set and config: solved, median and max CPU of the solved, PAR-2 (CPU seconds summed,
    an unsolved puzzle counting twice the limit), the mean 1-minute load; and the targets."""
    from bench.learn_shares import par2, solved

    path = large_path(args.train)
    recs = latest([json.loads(x) for x in path.read_text().splitlines()], ("set", "config"))
    print("| set | config | solved | median CPU s | max CPU s | PAR-2 | load |")
    print("|---|---|---|---|---|---|---|")
    for sname in dict.fromkeys(r["set"] for r in recs):
        rows = {c: [r for r in recs if r["set"] == sname and r["config"] == c] for c in dict.fromkeys(
            r["config"] for r in recs if r["set"] == sname)}  # fmt: skip
        for cname, sub in rows.items():
            cpus = sorted(r["cpu"] for r in sub if solved(r))
            med = f"{statistics.median(cpus):.2f}" if cpus else "-"
            top = f"{max(cpus):.2f}" if cpus else "-"
            load = statistics.mean(r.get("load1", 0.0) for r in sub)
            print(
                f"| {sname} | {cname} | {len(cpus)}/{len(sub)} | {med} | {top} | {par2(sub):.1f} "
                f"| {load:.2f} |"
            )
        race_recs, cp = rows.get("race"), rows.get("cpsat")
        if race_recs and cp:
            counts = [sum(map(solved, x)) for x in (race_recs, cp)]
            print(
                f"  {sname}: race solves {counts[0]} vs CP-SAT {counts[1]} (target >=); "
                f"PAR-2 ratio {par2(race_recs) / max(1e-9, par2(cp)):.2f} (target <= 0.5)"
            )
        alone = {c: rows[c] for c in rows if c not in ("race", "cpsat", "plain") and rows[c]}
        if race_recs and alone:

            def median_all(sub: list[dict[str, Any]]) -> float:
                return statistics.median(r["cpu"] if solved(r) else 2 * r["limit"] for r in sub)

            best = min(alone, key=lambda c: median_all(alone[c]))
            ratio = median_all(race_recs) / max(1e-9, median_all(alone[best]))
            print(
                f"  {sname}: race median / best member alone ({best}) median = {ratio:.2f} (target <= 1.10)"
            )


def section_learn(args: argparse.Namespace) -> None:
    """Derive the race's per-size shares from the training records (`large --train`) of each
    member alone, and write them into solvers/shares.py."""
    from bench.learn_shares import learn, write_shares

    recs = [json.loads(x) for x in large_path(True).read_text().splitlines()]
    if args.sets:  # learn these sides only; the others keep their rows
        recs = [r for r in recs if r["set"] in args.sets.split(",")]
    write_shares(learn(latest(recs, ("set", "config"))), ROOT / "solvers" / "shares.py")


def stochastic_subset(text: str) -> dict[str, int]:
    """Parse `frisch=3,acs25=20`: puzzles per set for configs of stochastic members only
    (they solve no frisch puzzle; a full run would spend an hour timing out)."""
    out: dict[str, int] = {}
    for part in filter(None, text.split(",")):
        name, _, count = part.partition("=")
        out[name] = int(count)
    return out


def section_throughput(args: argparse.Namespace) -> None:
    """CPU time of solve_many over 9x9 corpora: portfolio `race` vs `fast` (best of 3)."""
    path = OUT / "portfolio_throughput.jsonl"
    path.unlink(missing_ok=True)
    corpora = {
        "kaggle_20k": lines("9x9/kaggle_bryanpark_first20000.txt"),
        "17clue_10k": lines("9x9/tdoku_puzzles2_17_clue.txt", 10_000),
        "forum_hardest_5k": lines("9x9/tdoku_puzzles5_forum_hardest_1905_11plus.txt", 5_000),
        "top95": lines("9x9/norvig_top95.txt"),
    }
    solve_many(corpora["top95"], portfolio="race", time_limit=10)
    for cname, texts in corpora.items():
        best: dict[str, float] = {}
        statuses: dict[str, dict[str, int]] = {}
        for _ in range(3):
            for pf in ("fast", "race"):
                c = time.process_time()
                rs = solve_many(texts, portfolio=pf, time_limit=10)
                cpu = time.process_time() - c
                best[pf] = min(best.get(pf, cpu), cpu)
                statuses[pf] = {s: sum(r.status == s for r in rs) for s in {r.status.value for r in rs}}
        ratio = best["race"] / best["fast"]
        rec = {"corpus": cname, "puzzles": len(texts), "cpu": best, "ratio": ratio, "statuses": statuses}
        record(path, rec)
        print(
            f"{cname}: fast {len(texts) / best['fast']:.0f}/s, race {len(texts) / best['race']:.0f}/s "
            f"(race/fast CPU {ratio:.3f}); {statuses['race']}",
            flush=True,
        )


def section_calibrate(args: argparse.Namespace) -> None:
    """Measure ns per exact node, SAT conflicts per 3 ms slice and ns per stochastic work unit
    against the models that set the race's time shares."""
    from bench.hard_sets import TRAINING
    from solvers.sat.member import SAT_MODES, SatMember

    prop = EXACT_SOLVERS["propagation"]
    samples = {
        9: lines("9x9/tdoku_puzzles6_forum_hardest_1106.txt", 300),
        16: lines("16x16/sudoku_acs_general_16x16.txt")[700:730],
        25: lines("25x25/gecode_frisch_25x25.txt", 4),
        36: TRAINING["q36"].lines()[:3],
        49: TRAINING["q49"].lines()[:3],
        64: TRAINING["q64"].lines()[:3],
    }
    stop = np.zeros(1, dtype=np.int64)
    for n, texts in samples.items():
        box = Box.square(n)
        assert box is not None
        givens = np.stack([parse_puzzle(t, box).givens for t in texts])
        prop.solve_batch(givens[:1], box, max_nodes=10)
        c = time.process_time()
        out = prop.solve_batch(givens, box, limit=2, max_nodes=20_000 if n < 36 else 2_000)
        cpu = time.process_time() - c
        ns = cpu / max(1, int(out.nodes.sum())) * 1e9
        print(f"propagation {n}x{n}: {ns:.0f} ns/node measured, model {exact_ns_per_node(n):.0f}")
        for mode in SAT_MODES.values() if n >= 25 else ():
            rates = []
            for row in givens:
                member = SatMember(Puzzle(box, row), mode=mode)
                member.step(0, stop)  # encode
                member.step(0, stop)  # load
                c = time.process_time()
                for _ in range(40):
                    if member.step(0, stop) != "progress":
                        break
                rates.append(member.stats.get("conflicts", 0) / (time.process_time() - c) * 3e-3)
            print(
                f"{mode.name} {n}x{n}: {', '.join(f'{r:.0f}' for r in rates)} conflicts per 3 ms measured, "
                f"model {mode.conflicts_per_slice(n)}"
            )
    for n in (9, 25):
        text = samples[n][0]
        puzzle = parse_puzzle(text)
        for name, solver in STOCHASTIC_SOLVERS.items():
            run = solver.start(puzzle, np.random.default_rng(1), solver.make_params({"propagate": True}))
            run.step(1000)
            c, w0 = time.process_time(), run.work
            run.step(300_000)
            ns = (time.process_time() - c) / max(1, run.work - w0) * 1e9
            print(f"{name} {n}x{n}: {ns:.0f} ns/work unit measured, model {WORK_NS}")


def latest(records: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Keep, per group of `keys`, only the records of the group's latest kernel version
    (runs repeated after a kernel change replace the earlier ones), and of those the last
    one per puzzle (`index`: a puzzle run again, e.g. after a portfolio change, counts once)."""
    last: dict[tuple[Any, ...], str] = {}
    for rec in records:
        last[tuple(rec[k] for k in keys)] = rec.get("kernel", "")
    current = [r for r in records if r.get("kernel", "") == last[tuple(r[k] for k in keys)]]
    final = {(*(r[k] for k in keys), r.get("index")): r for r in current}
    return list(final.values())


def cactus_series(records: Iterable[dict[str, Any]], key: str) -> dict[str, tuple[list[float], int]]:
    """Group records by config: (sorted times of the solved ones, puzzles run)."""
    series: dict[str, tuple[list[float], int]] = {}
    for rec in records:
        times, runs = series.get(rec["config"], ([], 0))
        if rec["status"] == "solved" and rec[key] <= rec.get("limit", float("inf")):
            times.append(rec[key])
        series[rec["config"]] = (times, runs + 1)
    return {k: (sorted(t), n) for k, (t, n) in series.items()}


def section_plot(args: argparse.Namespace) -> None:
    """Cactus plot: puzzles solved (y) within a time (x, CPU for the hard sets), one line per
    config and set (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the plot section needs matplotlib: pip install matplotlib") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, dict[str, tuple[list[float], int]], int, float, str]] = []
    large = OUT / "portfolio_large.jsonl"
    if large.exists():
        recs = latest([json.loads(x) for x in large.read_text().splitlines()], ("set", "config"))
        stochastic = set(STOCHASTIC_SOLVERS)
        for rec in recs:  # records of an exact solver from an earlier kernel version say so
            if rec["config"] not in stochastic and rec.get("kernel", "") != KERNEL:
                rec["config"] += f" [older kernel {rec.get('kernel') or '?'}]"
        for sname in sorted({r["set"] for r in recs}):
            sub = [r for r in recs if r["set"] == sname]
            total = len({r["index"] for r in sub})
            span = max(r["cpu"] for r in sub)
            panels.append((f"{sname} ({total} puzzles)", cactus_series(sub, "cpu"), total, span, "CPU"))
    stoch = OUT / "portfolio_stochastic.jsonl"
    if stoch.exists():
        recs = [json.loads(x) for x in stoch.read_text().splitlines()]
        total = len({(r["corpus"], r["index"]) for r in recs if "nopropagate" not in r["config"]})
        span = max(r["wall"] for r in recs)
        title = f"9x9 top95+krazydad IM ({total}), stochastic alone"
        panels.append((title, cactus_series(recs, "wall"), total, span, "wall"))
    if not panels:
        print("no records to plot: run `large` or `stochastic` first")
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (title, series, total, span, clock) in zip(axes[0], panels, strict=True):
        for name, (times, runs) in sorted(series.items()):
            style = {"linewidth": 2.5, "color": "black"} if name == "race" else {}
            label = f"{name} ({len(times)}/{runs})"
            ax.step([0.0, *times], list(range(len(times) + 1)), where="post", label=label, **style)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(0, span)
        ax.set_xlabel(f"time per puzzle (s, {clock})")
        ax.set_ylabel("puzzles solved")
        ax.set_ylim(0, total)
        ax.set_title(title)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = OUT / "portfolio_cactus.png"
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


SECTIONS = {
    "demo": section_demo,
    "stochastic": section_stochastic,
    "large": section_large,
    "throughput": section_throughput,
    "calibrate": section_calibrate,
    "plot": section_plot,
    "table": section_table,
    "learn": section_learn,
}


def main(argv: list[str] | None = None) -> None:
    """Run the named sections in order."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sections", nargs="+", choices=[*SECTIONS, "all"])
    p.add_argument("--time-limit", type=float, default=None, help="seconds per puzzle (10; large: 60)")
    p.add_argument(
        "--count", type=int, default=100, help="stochastic: puzzles (half top95, half krazydad IM)"
    )
    p.add_argument("--solvers", default="", help="stochastic: comma list (default: all)")
    p.add_argument(
        "--corpora", default="", help="stochastic: norvig_top95 and/or krazydad_IM (default: both)"
    )
    p.add_argument("--configs", default="", help="large: race and/or member names (default: all)")
    p.add_argument("--sets", default="", help="large: frisch, acs25, q36, q49, q64 (default: all but acs25)")
    p.add_argument("--train", action="store_true", help="large, table: the training sets (for `learn`)")
    p.add_argument(
        "--wall-factor",
        type=float,
        default=10.0,
        help="large: wall time given per run, in CPU limits (a run stops at its CPU limit; the wall "
        "deadline only bounds a run on a machine so loaded that it gets under 1/10 of a core)",
    )
    p.add_argument(
        "--unsolved-only", action="store_true", help="large: run only puzzles not yet solved within the limit"
    )
    p.add_argument(
        "--stochastic-subset",
        default="",
        help="large: puzzles per set for stochastic members alone, e.g. frisch=3,acs25=20 (default: all)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="large: run only puzzles without a conclusive record (solved within the limit, or not "
        "solved after the whole CPU limit: a run cut short by the wall deadline runs again)",
    )
    p.add_argument("--append", action="store_true", help="large, stochastic: keep earlier records")
    p.add_argument(
        "--shard",
        default="0/1",
        help="large: K/N runs puzzles whose index is K mod N (one process per core, all with --append)",
    )
    p.add_argument("--no-propagate", action="store_true", help="stochastic: search from the givens alone")
    args = p.parse_args(argv)
    names = list(SECTIONS) if "all" in args.sections else args.sections
    for name in names:
        section_args = argparse.Namespace(**vars(args))
        if section_args.time_limit is None and name != "large":  # large: each set's own limit
            section_args.time_limit = 10.0
        print(f"== {name}", flush=True)
        SECTIONS[name](section_args)


if __name__ == "__main__":
    main()
