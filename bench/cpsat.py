"""OR-Tools CP-SAT on the frisch 25x25 puzzles: the reference the race is compared with.

    pip install ortools            # any venv: not a dependency of sudoku-batch
    python bench/cpsat.py [--time-limit 60] [--workers 1] [--model int|bool]

One CP-SAT solve per puzzle (`gecode_frisch_25x25.txt`): an integer variable per cell
with AllDifferent per row, column and box (`int`), or a Boolean per cell and value with
ExactlyOne per cell and per unit and value (`bool`). One worker by default: the race runs
in one thread. Prints and appends to bench/out/cpsat_frisch.jsonl one record per puzzle
(CPU seconds of the process around Solve); every solution is checked here.
Self-contained on purpose (no import of `solvers`), so it runs in a venv with ortools only;
`bench/portfolio.py large --configs cpsat` calls `solve` on any box shape (all the sets).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALPHABET = "123456789ABCDEFGHIJKLMNOP"
N, B = 25, 5


def units(rows: int = B, cols: int = B) -> list[list[int]]:
    """The rows, columns and boxes of a grid with boxes rows x cols, as cell lists."""
    n = rows * cols
    lines = [[r * n + c for c in range(n)] for r in range(n)]
    columns = [[r * n + c for r in range(n)] for c in range(n)]
    boxes = [
        [(br * rows + i) * n + bc * cols + j for i in range(rows) for j in range(cols)]
        for br in range(n // rows)
        for bc in range(n // cols)
    ]
    return lines + columns + boxes


def is_grid_solution(givens: list[int], grid: list[int], rows: int = B, cols: int = B) -> bool:
    """Every unit holds 1..N once and every given is kept."""
    n = rows * cols
    kept = all(g == 0 or g == v for g, v in zip(givens, grid, strict=True))
    return kept and all(sorted(grid[i] for i in u) == list(range(1, n + 1)) for u in units(rows, cols))


def solve(
    givens: list[int],
    model_kind: str,
    time_limit: float,
    workers: int,
    rows: int = B,
    cols: int = B,
    on_solver: Callable[[Any], None] | None = None,
) -> dict[str, object]:
    """Build and solve one CP-SAT model: -> a record with status, CPU seconds and the check.
    `on_solver` receives the CpSolver before the search (another thread may `stop_search` it)."""
    from ortools.sat.python import cp_model

    n = rows * cols
    m = cp_model.CpModel()
    if model_kind == "int":
        x = [m.NewIntVar(g or 1, g or n, f"x{i}") for i, g in enumerate(givens)]
        for u in units(rows, cols):
            m.AddAllDifferent([x[i] for i in u])
    else:
        b = [[m.NewBoolVar(f"b{i}_{v}") for v in range(n)] for i in range(n * n)]
        for i, g in enumerate(givens):
            m.AddExactlyOne(b[i])
            if g:
                m.Add(b[i][g - 1] == 1)
        for u in units(rows, cols):
            for v in range(n):
                m.AddExactlyOne([b[i][v] for i in u])
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    if on_solver is not None:
        on_solver(solver)
    cpu = time.process_time()
    status = solver.Solve(m)
    cpu = time.process_time() - cpu
    solved = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    grid: list[int] = []
    if solved and model_kind == "int":
        grid = [int(solver.Value(v)) for v in x]
    elif solved:
        grid = [next(v + 1 for v in range(n) if solver.Value(b[i][v])) for i in range(n * n)]
    return {"status": solver.StatusName(status), "solved": solved, "cpu": round(cpu, 3),
            "verified": is_grid_solution(givens, grid, rows, cols) if solved else None,
            "conflicts": solver.NumConflicts()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--model", choices=("int", "bool"), default="int")
    args = ap.parse_args()
    import ortools

    corpora = Path(os.environ.get("SUDOKU_CORPORA", ROOT.parent / "shared" / "corpora"))
    lines = (corpora / "25x25" / "gecode_frisch_25x25.txt").read_text().split()
    out = ROOT / "bench" / "out" / "cpsat_frisch.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    solved = []
    for index, line in enumerate(lines):
        givens = [0 if ch in ".0" else ALPHABET.index(ch) + 1 for ch in line]
        rec = {"ortools": ortools.__version__, "model": args.model, "workers": args.workers, "index": index,
               **solve(givens, args.model, args.time_limit, args.workers)}  # fmt: skip
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
        if rec["solved"] and rec["verified"]:
            solved.append(float(rec["cpu"]))  # type: ignore[arg-type]
    summary = f"median {statistics.median(solved):.2f} s, max {max(solved):.2f} s" if solved else "-"
    print(f"CP-SAT ({args.model}, {args.workers} worker): {len(solved)}/{len(lines)} solved; CPU {summary}")


if __name__ == "__main__":
    main()
