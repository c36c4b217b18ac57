"""Generator throughput, single thread, CPU time: the issue's targets, end to end.

    .venv/bin/python bench/generator.py [--repeat 3] [--scale 1.0] [--json FILE]

Each case calls `generate_chunk` (full grid, dig, rating, Python glue: what a worker
runs) after one warm-up call that loads or compiles the kernels, then reports the
median of `--repeat` runs measured with `time.process_time()` (CPU time of this process,
so other jobs on a shared machine inflate it less than wall time). The kernels are
single-threaded numba code. `--scale` shrinks or grows the counts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solvers.generate.generator import Options, generate_chunk  # noqa: E402
from solvers.model.puzzle import Box  # noqa: E402


@dataclass(frozen=True)
class Case:
    """One measured workload and the issue's target for it (0 = no target)."""

    name: str
    box: Box
    count: int
    options: Options
    target: float = 0.0


CASES = [
    Case("full grids 9x9", Box(3, 3), 50_000, Options(), 50_000),
    Case("unique 9x9 (random dig)", Box(3, 3), 4_000, Options(unique=True), 2_000),
    Case("minimal 9x9", Box(3, 3), 2_000, Options(minimal=True), 500),
    Case("unique 9x9 rotational", Box(3, 3), 4_000, Options(unique=True, symmetry="rotational")),
    Case("unique 9x9, 30 clues", Box(3, 3), 4_000, Options(unique=True, clues=30)),
    Case("unique 16x16", Box(4, 4), 40, Options(unique=True), 20),
    Case("minimal 16x16", Box(4, 4), 10, Options(minimal=True)),
    Case("unique 25x25", Box(5, 5), 4, Options(unique=True), 1),
    Case("unique 12x12 (3x4 boxes)", Box(3, 4), 200, Options(unique=True)),
    Case("full grids 16x16", Box(4, 4), 1_000, Options()),
    Case("full grids 25x25", Box(5, 5), 100, Options()),
    Case("full grids 36x36", Box(6, 6), 10, Options()),
]


def measure(case: Case, repeat: int, scale: float) -> dict[str, object]:
    """Run one case `repeat` times (seeds 1..repeat) after a warm-up; median CPU seconds."""
    count = max(1, round(case.count * scale))
    generate_chunk(case.box, 1, 0, case.options)  # load or compile the kernels
    times = []
    for seed in range(1, repeat + 1):
        t0 = time.process_time()
        items = generate_chunk(case.box, count, seed, case.options)
        times.append(time.process_time() - t0)
        assert len(items) == count
    median = statistics.median(times)
    rate = count / median if median > 0 else float("inf")
    return {
        "case": case.name,
        "count": count,
        "median_s": round(median, 4),
        "per_s": round(rate, 2),
        "target_per_s": case.target,
        "meets": None if not case.target else rate >= case.target,
        "clues_last": round(sum(g.clues for g in items) / len(items), 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Print a table of the cases (and write JSON); exit 1 if a target is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="", help="run the cases whose name contains this text")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    print(f"{'case':28} {'count':>7} {'median s':>9} {'per s':>10} {'target':>8}  clues")
    for case in CASES:
        if args.only and args.only not in case.name:
            continue
        r = measure(case, args.repeat, args.scale)
        rows.append(r)
        mark = "" if r["meets"] is None else ("ok" if r["meets"] else "MISSED")
        target = f"{case.target:g}" if case.target else "-"
        print(
            f"{r['case']:28} {r['count']:>7} {r['median_s']:>9.3f} {r['per_s']:>10.1f} {target:>8}  "
            f"{r['clues_last']:<6} {mark}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if any(r["meets"] is False for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
