"""Benchmark every registered exact solver on the public corpora.

    python -m bench.solvers [--corpora 9x9/norvig_top95.txt 16x16/*] [--solvers propagation]
                            [--limit N] [--repeat 3] [--time-limit 10] [--budget 20]
                            [--no-compile]
    python -m bench.solvers --versus-tdoku [--tdoku PATH] [--before CHECKOUT] [--rounds 3]

Per corpus and solver it prints puzzles/second (CPU time of the whole batch call,
median of `--repeat` runs), the median and maximum time per puzzle (measured inside the
kernel, wall clock, median over the runs), how many puzzles were solved (verified) or
timed out, and per solver and box shape the JIT compile time (a fresh process with an
empty NUMBA_CACHE_DIR: time of the first call) and the cache-load time (another fresh
process on that now warm cache: time of the first call, import excluded).

Corpora are read from $SUDOKU_CORPORA, else ../shared/corpora next to the repository;
missing files are skipped. Slow solvers are kept to minutes: each puzzle gets
`--time-limit` seconds, and a probe of a few puzzles (itself capped at a quarter of the
budget) sizes the sample, spread evenly over the file, so that one corpus x solver cell
costs about `--budget` CPU seconds (except for the `--full` solvers, which run every
puzzle). A sample smaller than the corpus shows in the `n` column.

`--versus-tdoku` prints instead the 9x9 kernel against tdoku on issue 25's five sets (CPU
time, interleaved rounds, guesses per puzzle beside tdoku's): see `bench/tdoku.py`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from solvers.exact import EXACT_SOLVERS  # noqa: E402 - after the path fix above
from solvers.kernel.outcome import TIMEOUT  # noqa: E402
from solvers.model.parse import parse_compact_batch  # noqa: E402
from solvers.model.puzzle import Box  # noqa: E402
from solvers.model.verify import verify_batch  # noqa: E402

DEFAULT_CORPORA = [
    "9x9/tdoku_puzzles2_17_clue.txt",
    "9x9/kaggle_bryanpark_first20000.txt",
    "9x9/tdoku_puzzles3_magictour_top1465.txt",
    "9x9/tdoku_puzzles5_forum_hardest_1905_11plus.txt",
    "9x9/tdoku_puzzles6_forum_hardest_1106.txt",
    "16x16/krazydad_hexsudoku_22k.txt",
    "25x25/sudoku_acs_general_25x25.txt",
]
PROBE = 20  # puzzles timed once to size the sample of a slow solver
DEFAULT = "propagation"  # the default solver: the one `solve_many` uses


def corpora_dir() -> Path:
    """$SUDOKU_CORPORA, else ../shared/corpora beside the repository."""
    env = os.environ.get("SUDOKU_CORPORA")
    return Path(env) if env else (REPO.parent / "shared" / "corpora").resolve()


def load_corpus(path: Path, limit: int | None = None) -> tuple[Box, np.ndarray]:
    """Read a one-puzzle-per-line corpus: -> (box, givens uint8[B, N*N]). With `limit`,
    take that many puzzles spread evenly over the file (corpora are often sorted by
    difficulty, so the head alone would be biased)."""
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if limit is not None and limit < len(lines):
        lines = [lines[int(k)] for k in np.linspace(0, len(lines) - 1, limit).round()]
    box = Box.square(int(round(len(lines[0]) ** 0.5)))
    if box is None:
        raise ValueError(f"{path}: lines of {len(lines[0])} cells are not a square grid")
    givens, ok = parse_compact_batch(lines, box)
    if not ok.all():
        raise ValueError(f"{path}: {int((~ok).sum())} lines do not parse")
    return box, givens


def _first_call(solver: str, rows: int, cols: int, cache_dir: str) -> float:
    """Seconds of the first solve in a fresh process using `cache_dir` (import excluded)."""
    code = (
        "import json, time, numpy as np\n"
        "from solvers.exact import EXACT_SOLVERS\n"
        "from solvers.model.puzzle import Box\n"
        f"box = Box({rows}, {cols})\n"
        "n = box.n; y = np.arange(n)[:, None]; shift = (y % box.rows) * box.cols + y // box.rows\n"
        "g = (((np.arange(n)[None, :] + shift) % n) + 1).astype(np.uint8).reshape(1, -1)\n"
        "g[0, 0] = 0\n"
        "t = time.perf_counter()\n"
        f"EXACT_SOLVERS[{solver!r}].solve_batch(g, box, time_limit=5.0)\n"
        "print(json.dumps(time.perf_counter() - t))\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def compile_times(solver: str, box: Box) -> tuple[float, float]:
    """(cold compile, warm cache load) seconds of a solver's first call for a box shape."""
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as tmp:
        cold = _first_call(solver, box.rows, box.cols, tmp)
        warm = _first_call(solver, box.rows, box.cols, tmp)
    return cold, warm


def probe(name: str, box: Box, givens: np.ndarray, time_limit: float, budget: float) -> float:
    """Estimate a solver's CPU seconds per puzzle on a few puzzles spread over the corpus,
    one at a time, stopping once `budget` seconds are spent (a slow solver stops early)."""
    solver = EXACT_SOLVERS[name]
    solver.solve_batch(givens[:1], box, time_limit=min(time_limit, budget))  # compile or load first
    spent, done = 0.0, 0
    for k in np.linspace(0, len(givens) - 1, min(PROBE, len(givens))).astype(int):
        t0 = time.process_time()
        solver.solve_batch(givens[k : k + 1], box, time_limit=time_limit)
        spent += time.process_time() - t0
        done += 1
        if spent > budget:
            break
    return spent / done


def run(solver_name: str, box: Box, givens: np.ndarray, repeat: int, time_limit: float) -> dict:
    """Time one solver on one batch: puzzles/s, per-puzzle times, solved, timeouts."""
    solver = EXACT_SOLVERS[solver_name]
    cpu, per_puzzle = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        out = solver.solve_batch(givens, box, time_limit=time_limit)
        cpu.append(time.process_time() - t0)
        per_puzzle.append(out.ns)
    ns = np.median(np.stack(per_puzzle), axis=0)
    solved = verify_batch(givens, out.solutions[:, 0], box.rows, box.cols) & (out.counts > 0)
    return {
        "rate": len(givens) / max(statistics.median(cpu), 1e-9),
        "median_us": float(np.median(ns)) / 1e3,
        "max_us": float(ns.max()) / 1e3,
        "solved": int(solved.sum()),
        "timeouts": int((out.status == TIMEOUT).sum()),
    }


def run_api(path: Path, repeat: int) -> dict:
    """Time `solvers.solve_many` on a corpus as a user calls it (texts in, verified Results out):
    CPU seconds of the call, median of `repeat`, and of the call plus reading every row's
    status and solution (which builds each row's SolveResult)."""
    from solvers.api import solve_many

    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    solve_many(lines[:10])  # load the kernels
    call, read = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        results = solve_many(lines)
        call.append(time.process_time() - t0)
        t0 = time.process_time()
        solved = sum(1 for r in results if r.status == "solved" and r.solution)
        read.append(call[-1] + time.process_time() - t0)
    n = len(lines)
    rate, read_rate = n / statistics.median(call), n / statistics.median(read)
    return {"n": n, "solved": solved, "rate": rate, "read_rate": read_rate}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--versus-tdoku" in argv:
        from bench import tdoku

        tdoku.main([a for a in argv if a != "--versus-tdoku"])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", nargs="*", default=DEFAULT_CORPORA, help="files in the corpora dir (globs)")
    ap.add_argument("--solvers", nargs="*", default=None, help="default: every registered exact solver")
    ap.add_argument("--limit", type=int, default=None, help="at most N puzzles per corpus")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per puzzle")
    ap.add_argument("--budget", type=float, default=20.0, help="CPU seconds per corpus x solver")
    ap.add_argument("--full", nargs="*", default=["propagation"], help="solvers never sampled")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile / cache-load timings")
    ap.add_argument("--no-api", action="store_true", help="skip the solve_many rows")
    args = ap.parse_args(argv)

    root = corpora_dir()
    paths = []
    for pattern in args.corpora:
        found = sorted(glob.glob(str(root / pattern)))
        found = [p for p in found if p.endswith(".txt") and not p.endswith(".solutions.txt")]
        if not found:
            print(f"skipped {pattern}: not found under {root}")
        paths.extend(Path(p) for p in found)
    names = args.solvers or sorted(EXACT_SOLVERS)
    for name in names:
        if name not in EXACT_SOLVERS:
            raise SystemExit(f"unknown solver {name!r}; registered: {', '.join(sorted(EXACT_SOLVERS))}")
    print(f"CPU: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"{'corpus':50} {'solver':13} {'n':>6} {'solved':>6} {'t/o':>4} ", end="")
    print(f"{'puzzles/s':>11} {'med us':>9} {'max us':>10}")
    compiled: dict[tuple[str, Box], tuple[float, float]] = {}
    for path in paths:
        box, everything = load_corpus(path, args.limit)
        label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        for name in names:
            if not args.no_compile and (name, box) not in compiled:
                compiled[(name, box)] = compile_times(name, box)
            size = len(everything)
            if name not in args.full:
                per = probe(name, box, everything, args.time_limit, args.budget / 4)
                size = max(1, min(size, int(args.budget / (args.repeat * max(per, 1e-9)))))
            givens = load_corpus(path, size)[1] if size < len(everything) else everything
            r = run(name, box, givens, args.repeat, args.time_limit)
            print(
                f"{label[:50]:50} {name:13} {len(givens):6d} {r['solved']:6d} {r['timeouts']:4d} "
                f"{r['rate']:11,.0f} {r['median_us']:9,.1f} {r['max_us']:10,.0f}",
                flush=True,
            )
    if not args.no_api and DEFAULT in names:
        print(f"\nthrough solve_many ({DEFAULT}; texts in, verified Results out; CPU, median {args.repeat})")
        print(f"{'corpus':50} {'n':>6} {'solved':>6} {'puzzles/s':>11} {'+ read every row':>17}")
        for path in paths:
            label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            r = run_api(path, args.repeat)
            print(f"{label[:50]:50} {r['n']:6d} {r['solved']:6d} {r['rate']:11,.0f} {r['read_rate']:17,.0f}")
    if compiled:
        print(f"\n{'solver':13} {'box':5} {'compile s (cold)':>17} {'cache load s':>13}")
        for (name, box), (cold, warm) in sorted(compiled.items(), key=lambda kv: (kv[0][0], kv[0][1].n)):
            print(f"{name:13} {str(box):5} {cold:17.2f} {warm:13.3f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
