"""The 9x9 kernel against tdoku (t-dillon/tdoku, the fastest published 9x9 solver), in one window.

    python -m bench.tdoku [--tdoku PATH] [--before CHECKOUT] [--rounds 3] [--min-puzzles 100000]
    python -m bench.solvers --versus-tdoku ...   (the same)

On the five sets of issue 25 (kaggle head, 17-clue, magictour top1465, forum hardest 1905
first 10k, forum hardest 1106; files under $SUDOKU_CORPORA, else ../shared/corpora)
it prints per set: tdoku's puzzles/s, the kernel's (`propagation`'s 9x9 kernel on parsed
arrays, first solution) and its ratio to tdoku, and guesses per puzzle of both (tdoku reports
its own through its API). CPU time of one thread, `--rounds` interleaved rounds (tdoku, the
kernel, the `--before` kernel, then again), medians; a set smaller than `--min-puzzles` is
repeated to that size so that one timing is not a few milliseconds.

tdoku is never built here and no copy of it is kept in this repository: `--tdoku` (or
$TDOKU_LIB, else ~/.cache/tdoku/libtdoku_shared.so) names tdoku's shared library, built by
you from a copy of tdoku with its own build files. Its C entry point
`TdokuSolverDpllTriadSimd(puzzle, limit, configuration, solution, &guesses)` is called from a
compiled loop (numba calls the ctypes function directly), so no Python runs per puzzle.
`--before` names a checkout of another revision of this repository: its kernel runs in a
subprocess each round on the same puzzles (CPU time measured inside it), for before/after.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from solvers.exact import EXACT_SOLVERS  # noqa: E402 - after the path fix above
from solvers.model.parse import parse_compact_batch  # noqa: E402
from solvers.model.puzzle import Box  # noqa: E402

SETS = [  # (label, file under the corpora dir, puzzles from the head of the file or None for all)
    ("kaggle", "9x9/kaggle_bryanpark_first20000.txt", None),
    ("17-clue", "9x9/tdoku_puzzles2_17_clue.txt", None),
    ("top1465", "9x9/tdoku_puzzles3_magictour_top1465.txt", None),
    ("fh1905 (first 10k)", "9x9/tdoku_puzzles5_forum_hardest_1905_11plus.txt", 10_000),
    ("fh1106", "9x9/tdoku_puzzles6_forum_hardest_1106.txt", None),
]
TARGET = 0.8  # issue 25: the kernel at >= 0.8x tdoku on each set
STRIDE = 82  # bytes per puzzle handed to tdoku: 81 symbols and a NUL (tdoku reads byte 81)
NINE = Box(3, 3)


def corpora_dir() -> Path:
    """$SUDOKU_CORPORA, else ../shared/corpora beside the repository (as `bench.solvers`)."""
    env = os.environ.get("SUDOKU_CORPORA")
    return Path(env) if env else (REPO.parent / "shared" / "corpora").resolve()


def load_givens(path: Path, head: int | None) -> np.ndarray:
    """The first `head` puzzles (all with None) of a 9x9 corpus file, parsed: uint8[B, 81]."""
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()][:head]
    givens, ok = parse_compact_batch(lines, NINE)
    if not ok.all():
        raise SystemExit(f"{path}: {int((~ok).sum())} lines are not 9x9 puzzles")
    return givens


def default_library() -> Path:
    """$TDOKU_LIB, else ~/.cache/tdoku/libtdoku_shared.so."""
    env = os.environ.get("TDOKU_LIB")
    return Path(env) if env else Path.home() / ".cache" / "tdoku" / "libtdoku_shared.so"


def tdoku_runner(library: Path) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A function solving puzzles (uint8[B, 82]: '1'-'9' or '.', then NUL) with tdoku, first
    solution: -> (solution counts, guesses), both uint64[B]."""
    lib = ctypes.CDLL(str(library))
    solve = lib.TdokuSolverDpllTriadSimd
    # pointers passed as addresses: numba calls the C function with plain integers
    solve.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_size_t]
    solve.restype = ctypes.c_size_t

    @njit(nogil=True)
    def run(puzzles, solutions, counts, guesses):  # type: ignore[no-untyped-def]
        g = np.zeros(1, dtype=np.uint64)
        for i in range(counts.shape[0]):
            counts[i] = solve(
                puzzles.ctypes.data + STRIDE * i, 1, 0, solutions.ctypes.data + 81 * i, g.ctypes.data
            )
            guesses[i] = g[0]

    def call(puzzles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = puzzles.shape[0]
        counts, guesses = np.zeros(b, np.uint64), np.zeros(b, np.uint64)
        run(np.ascontiguousarray(puzzles), np.zeros((b, 81), np.uint8), counts, guesses)
        return counts, guesses

    call(tdoku_text(np.zeros((1, 81), np.uint8)))  # compile the loop before any timing
    return call


def tdoku_text(givens: np.ndarray) -> np.ndarray:
    """Parsed 9x9 givens (uint8[B, 81], 0 = empty) as tdoku's input rows (uint8[B, 82])."""
    out = np.zeros((givens.shape[0], STRIDE), np.uint8)
    out[:, :81] = np.where(givens == 0, ord("."), givens + ord("0"))
    return out


@dataclass
class Timing:
    """One contender on one set: CPU seconds per round, guesses per puzzle."""

    cpu: list[float]
    guesses: float = 0.0

    def rate(self, n: int) -> float:
        return n / max(statistics.median(self.cpu), 1e-9)


_BEFORE = """
import json, sys, time, numpy as np
from solvers.exact import EXACT_SOLVERS
from solvers.model.puzzle import Box
givens = np.load(sys.argv[1])
solver, box = EXACT_SOLVERS["propagation"], Box(3, 3)
solver.solve_batch(givens[:2], box)
t = time.process_time()
out = solver.solve_batch(givens, box)
cpu = time.process_time() - t
print(json.dumps({"cpu": cpu, "guesses": float(out.guesses.mean()), "solved": int((out.counts > 0).sum())}))
"""


def before_kernel(checkout: Path, path: Path) -> dict:
    """Run another checkout's kernel on the givens saved at `path` in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run(
        [sys.executable, "-c", _BEFORE, str(path)], cwd=checkout, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"the kernel of {checkout} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(
    tdoku: Callable | None, before: Path | None, rounds: int, min_puzzles: int, root: Path
) -> list[dict]:
    """Time every contender on every set, interleaved; print a row per set as it finishes."""
    solver = EXACT_SOLVERS["propagation"]
    solver.solve_batch(np.zeros((1, 81), np.uint8), NINE)  # compile or load the kernel first
    rows = []
    for label, name, head in SETS:
        path = root / name
        if not path.exists():
            print(f"{label:20} skipped: {path} not found", flush=True)
            continue
        givens = load_givens(path, head)
        n0 = len(givens)
        givens = np.tile(givens, (max(1, -(-min_puzzles // n0)), 1))
        text = tdoku_text(givens)
        t_tdoku, t_kernel, t_before = Timing([]), Timing([]), Timing([])
        with tempfile.TemporaryDirectory(prefix="bench-tdoku-") as tmp:
            saved = Path(tmp) / "givens.npy"
            np.save(saved, givens)
            for _ in range(rounds):
                if tdoku is not None:
                    t0 = time.process_time()
                    counts, guesses = tdoku(text)
                    t_tdoku.cpu.append(time.process_time() - t0)
                    if (counts == 0).any():
                        raise SystemExit(f"tdoku found no solution for some puzzle of {name}")
                    t_tdoku.guesses = float(guesses.mean())
                t0 = time.process_time()
                out = solver.solve_batch(givens, NINE)
                t_kernel.cpu.append(time.process_time() - t0)
                if (out.counts == 0).any():
                    raise SystemExit(f"the kernel found no solution for some puzzle of {name}")
                t_kernel.guesses = float(out.guesses.mean())
                if before is not None:
                    got = before_kernel(before, saved)
                    t_before.cpu.append(got["cpu"])
                    t_before.guesses = got["guesses"]
        n = len(givens)
        row = {
            "set": label,
            "n": n0,
            "repeated": n // n0,
            "kernel": t_kernel.rate(n),
            "kernel_g": t_kernel.guesses,
        }
        if tdoku is not None:
            row |= {"tdoku": t_tdoku.rate(n), "tdoku_g": t_tdoku.guesses}
        if before is not None:
            row |= {"before": t_before.rate(n), "before_g": t_before.guesses}
        print_row(row)
        rows.append(row)
    return rows


def header(tdoku: bool, before: bool) -> None:
    line = f"{'set':20} {'n':>6} {'x':>3} {'kernel/s':>10}"
    line += f" {'tdoku/s':>10} {'kernel/tdoku':>12}" if tdoku else ""
    line += f" {'before/s':>10}" + (f" {'before/tdoku':>12}" if tdoku else "") if before else ""
    line += f" {'guesses/puzzle: kernel':>23}" + (" before" if before else "") + (" tdoku" if tdoku else "")
    print(line, flush=True)


def print_row(r: dict) -> None:
    line = f"{r['set']:20} {r['n']:6d} {r['repeated']:3d} {r['kernel']:10,.0f}"
    if "tdoku" in r:
        mark = "" if r["kernel"] >= TARGET * r["tdoku"] else " <"
        line += f" {r['tdoku']:10,.0f} {r['kernel'] / r['tdoku']:10.2f}x{mark:1}"
    if "before" in r:
        line += f" {r['before']:10,.0f}"
        line += f" {r['before'] / r['tdoku']:11.2f}x" if "tdoku" in r else ""
    line += f" {r['kernel_g']:23.2f}"
    line += f" {r['before_g']:6.2f}" if "before" in r else ""
    line += f" {r['tdoku_g']:6.2f}" if "tdoku" in r else ""
    print(line, flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tdoku", type=Path, default=None, help="tdoku's shared library (default: $TDOKU_LIB, ~/.cache)"
    )
    ap.add_argument(
        "--before", type=Path, default=None, help="a checkout of another revision, for before/after"
    )
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the median is printed)")
    ap.add_argument("--min-puzzles", type=int, default=100_000, help="repeat a smaller set to this many")
    args = ap.parse_args(argv)
    if not 1 <= args.rounds <= 100 or not 1 <= args.min_puzzles <= 10_000_000:
        raise SystemExit("--rounds must be 1..100 and --min-puzzles 1..10000000")
    library = args.tdoku or default_library()
    tdoku = None
    if library.is_file():
        tdoku = tdoku_runner(library)
    else:
        print(f"tdoku: {library} not found (--tdoku PATH to its libtdoku_shared.so): the kernel alone")
    if args.before is not None and not (args.before / "solvers" / "exact").is_dir():
        raise SystemExit(f"--before {args.before}: not a checkout of this repository")
    print(
        f"CPU time, one thread, median of {args.rounds} interleaved rounds; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at start"
    )
    header(tdoku is not None, args.before is not None)
    compare(tdoku, args.before, args.rounds, args.min_puzzles, corpora_dir())
    print(
        f"load average {os.getloadavg()[0]:.2f} at the end; target: kernel >= {TARGET}x tdoku ('<' misses it)"
    )


if __name__ == "__main__":
    main()
