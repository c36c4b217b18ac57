"""A race sharing learnt clauses never returns a wrong grid or a wrong `unsolvable` (issue 34, last target).

    python bench/sharing_check.py [--fleet 2] [--escalate-after 0.5] [--puzzle frisch:3 ...]

Every puzzle of gecode's frisch 25x25 set and the 25x25 lines of tests/data/conformance.txt, then each one's
twin (one empty cell given a value its solution does not hold and no peer given holds: unsolvable when the
solution is unique), is one broker job (`--portfolio race`, seed 7) on `--fleet` workers that share their
learnt clauses (`share/` must be built: `make share`). Each answer is judged on its own: a solved grid by
`solvers.model.verify.is_solution`; an `unsolvable` by a plain cell x value CNF written here (no code shared
with the solvers' encodings) that python-sat's CaDiCaL must refute. A timeout is counted, not judged.
A grid of a hole set (`--puzzle q64:3`, `train-q64:0`) has a solution by construction: it gets no twin, and an
`unsolvable` on it is wrong. Records: bench/out/sharing_check.jsonl (appended). The command exits 1 when any
answer is wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.escalation import REPO, Server, commit, one_run, puzzle_text, start_workers, stop  # noqa: E402

OUT = REPO / "bench" / "out" / "sharing_check.jsonl"
SYMBOLS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TIME_LIMIT_S = 60.0  # per job, as the frisch set's in bench/escalation.py
TRUTH_LIMIT_S = 300.0  # the plain CNF's refutation of one `unsolvable` answer


def conformance_names() -> list[str]:
    """`conf25:I` for each 25x25 line I (0-based among them) of the conformance file."""
    lines = (REPO / "tests" / "data" / "conformance.txt").read_text().splitlines()
    count = sum(1 for line in lines if line.startswith("5x5\t"))
    return [f"conf25:{i}" for i in range(count)]


def text_of(name: str) -> str:
    """The puzzle `name`: `conf25:I` (see above) or any name bench/escalation.py knows."""
    kind, _, arg = name.partition(":")
    if kind != "conf25":
        return puzzle_text(name)
    lines = (REPO / "tests" / "data" / "conformance.txt").read_text().splitlines()
    return [line.split("\t")[1] for line in lines if line.startswith("5x5\t")][int(arg)]


def values(text: str) -> tuple[int, list[int]]:
    """The side and the cells (0: empty) of a puzzle on one line with a square box."""
    n = math.isqrt(len(text))
    return n, [0 if ch == "." else SYMBOLS.index(ch) + 1 for ch in text]


def units(n: int) -> list[list[int]]:
    """The rows, columns and boxes of a side-`n` grid with a square box, as cell lists."""
    b = math.isqrt(n)
    rows = [[r * n + c for c in range(n)] for r in range(n)]
    cols = [[r * n + c for r in range(n)] for c in range(n)]
    boxes = [
        [(t + y) * n + s + x for y in range(b) for x in range(b)]
        for t in range(0, n, b)
        for s in range(0, n, b)
    ]
    return rows + cols + boxes


def has_solution(text: str, limit_s: float = TRUTH_LIMIT_S) -> bool | None:
    """Whether the puzzle has a solution, by CaDiCaL on a plain CNF (cell x value, pairwise at-most-one, every
    unit holding every value); None when it did not decide within `limit_s`."""
    from pysat.solvers import Cadical195

    n, cells = values(text)

    def var(cell: int, v: int) -> int:
        return cell * n + v

    groups = [[var(cell, v) for v in range(1, n + 1)] for cell in range(n * n)]
    groups += [[var(cell, v) for cell in unit] for unit in units(n) for v in range(1, n + 1)]
    clauses = list(groups) + [[-a, -b] for g in groups for i, a in enumerate(g) for b in g[i + 1 :]]
    clauses += [[var(cell, v)] for cell, v in enumerate(cells) if v]
    with Cadical195(bootstrap_with=clauses) as solver:
        timer = threading.Timer(limit_s, solver.interrupt)
        timer.start()
        try:
            return solver.solve_limited(expect_interrupt=True)
        finally:
            timer.cancel()


def twin(text: str, solution: str, rng: random.Random) -> str:
    """`text` with one empty cell given a value `solution` does not hold there and no given peer holds."""
    n, cells = values(text)
    _, solved = values(solution)
    peers = {cell: set() for cell in range(n * n)}
    for unit in units(n):
        for cell in unit:
            peers[cell].update(unit)
    empty = [c for c in range(n * n) if not cells[c]]
    for cell in rng.sample(empty, k=len(empty)):  # every empty cell, in a random order
        taken = {cells[p] for p in peers[cell]} | {solved[cell]}
        free = [v for v in range(1, n + 1) if v not in taken]
        if free:
            cells[cell] = rng.choice(free)
            return "".join("." if v == 0 else SYMBOLS[v - 1] for v in cells)
    raise ValueError("no empty cell can take another value")


def judge(text: str, record: dict[str, Any], solvable: bool = False) -> str:
    """`right`, `wrong` (with the reason) or `timeout` for one answer; `solvable`: the puzzle is known to have
    a solution (a full grid with holes: bench/hard_sets.py), so `unsolvable` is wrong without a refutation."""
    from solvers.model.parse import parse_puzzle
    from solvers.model.verify import is_solution

    status = record["status"]
    if status == "solved":
        puzzle = parse_puzzle(text)
        return (
            "right"
            if is_solution(puzzle, parse_puzzle(record["solution"], puzzle.box).givens)
            else "wrong: grid"
        )
    if status == "unsolvable":
        truth = True if solvable else has_solution(text)
        return {False: "right", True: "wrong: it has a solution", None: "unconfirmed"}[truth]
    return "timeout" if status == "timeout" else f"wrong: status {status}"


def holes(name: str) -> bool:
    """Whether `name` is a grid of a hole set (`q49:I`, `train-q64:I`...): solvable by construction. Such a
    puzzle gets no twin (its lines are comma separated, beyond `values`' symbols; the plain CNF of a 64x64
    grid is 33M clauses), but a wrong `unsolvable` on it is caught all the same."""
    return name.partition(":")[0].removeprefix("train-") in ("q36", "q49", "q64")


def imported(counters: Any) -> int:
    """The learnt clauses the record's counters say were imported, summed over every member."""
    if isinstance(counters, dict):
        return sum(v if k == "imported" and isinstance(v, int) else imported(v) for k, v in counters.items())
    return 0


def run_one(url: str, name: str, text: str, args: argparse.Namespace) -> dict[str, Any]:
    """One job of `text` on the fleet, judged and recorded."""
    wall, record = one_run(url, text, args.escalate_after, TIME_LIMIT_S)
    verdict = judge(text, record, holes(name))
    rec = {
        "kind": "check",
        "puzzle": name,
        "fleet": args.fleet,
        "wall": round(wall, 3),
        "status": record["status"],
        "solver": record["solver"],
        "imported": imported(record.get("counters")),
        "verdict": verdict,
        "solution": record.get("solution"),
        "commit": commit(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(
        f"{name}: {record['status']} by {record['solver']} in {wall:.2f} s, {rec['imported']} clauses "
        f"imported: {verdict}",
        flush=True,
    )
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleet", type=int, default=2)
    ap.add_argument("--escalate-after", type=float, default=0.5)
    ap.add_argument("--puzzle", action="append", help="these puzzles only (repeat), e.g. frisch:3, conf25:0")
    ap.add_argument(
        "--out", type=Path, default=OUT, help="the records' file (default bench/out/sharing_check.jsonl)"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed check stops its server and workers
    names = args.puzzle or [*(f"frisch:{i}" for i in range(18)), *conformance_names()]
    rng = random.Random(7)
    recs = []
    with Server() as server:
        procs = start_workers(server.url, args.fleet, server.tmp)
        try:
            for name in names:
                first = run_one(server.url, name, text_of(name), args)
                recs.append(first)
                if first["status"] == "solved" and not holes(name):
                    recs.append(
                        run_one(server.url, f"twin-{name}", twin(text_of(name), first["solution"], rng), args)
                    )
        finally:
            stop(procs)
    wrong = [r for r in recs if r["verdict"].startswith("wrong")]
    count = {v: sum(r["verdict"] == v for r in recs) for v in ("right", "timeout", "unconfirmed")}
    shared = sum(r["imported"] > 0 for r in recs)
    print(
        f"{len(recs)} answers on {args.fleet} workers sharing: {count['right']} right, {len(wrong)} wrong, "
        f"{count['timeout']} timeouts, {count['unconfirmed']} unsolvable unconfirmed; {shared} runs imported "
        f"learnt clauses"
    )
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
