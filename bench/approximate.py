"""The approximate grid a race returns when time runs out: its cost with and without the endgame.

Issue 24: at 25x25 the learned shares give each stochastic member 0.2% of the race, so a race
that ends unsolved returned a grid from members that ran a few milliseconds (cost 72-99), or no
grid at all (`timeout`). The race now leaves the last `PortfolioSpec.endgame` of the limit to
the stochastic members. This bench races the frisch 25x25 puzzles (the hardest set at hand) with
portfolio `race` under `--endgames` (0 = before), interleaved puzzle by puzzle and seed by seed,
and prints per endgame: solved, approximate (median, mean and max cost), timeouts with no grid,
and the CPU seconds of the races (the limit is wall time: on a shared machine a race gets less).

    .venv/bin/python bench/approximate.py --time-limit 2 --seeds 3 --endgames 0,0.1,0.2
    .venv/bin/python bench/approximate.py --time-limit 20 --seeds 3 --endgames 0,0.1

Records are appended to bench/out/approximate.jsonl as they are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.hard_sets import CORPORA

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "approximate.jsonl"
FRISCH = CORPORA / "25x25" / "gecode_frisch_25x25.txt"


def run(line: str, endgame: float, time_limit: float, seed: int) -> dict[str, object]:
    """Race one puzzle with the given endgame; its status, cost, winner and CPU seconds."""
    from solvers.api import solve
    from solvers.race.portfolio import PRESETS

    spec = PRESETS["race"].model_copy(update={"endgame": endgame})
    cpu = time.process_time()
    result = solve(line, portfolio=spec, time_limit=time_limit, seed=seed)  # type: ignore[arg-type]
    return {
        "endgame": endgame,
        "time_limit": time_limit,
        "seed": seed,
        "status": result.status.value,
        "cost": result.cost,
        "solver": result.solver,
        "cpu_s": round(time.process_time() - cpu, 3),
        "wall_s": round(result.elapsed, 3),
    }


def table(records: list[dict[str, object]]) -> None:
    """Print one line per endgame."""
    for endgame in sorted({r["endgame"] for r in records}):  # type: ignore[type-var]
        mine = [r for r in records if r["endgame"] == endgame]
        approx = [int(r["cost"]) for r in mine if r["status"] == "approximate"]  # type: ignore[arg-type]
        solved = sum(r["status"] == "solved" for r in mine)
        none = sum(r["status"] == "timeout" for r in mine)
        cpu = statistics.median(float(r["cpu_s"]) for r in mine)  # type: ignore[arg-type]
        costs = (
            f"median {statistics.median(approx):g}, mean {statistics.mean(approx):.1f}, max {max(approx)}"
            if approx
            else "-"
        )
        print(
            f"endgame {endgame:g}: {len(mine)} races: solved {solved}, approximate {len(approx)} "
            f"(cost {costs}), no grid {none}; median CPU {cpu:.2f} s"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--endgames", default="0,0.1")
    p.add_argument("--count", type=int, default=0, help="the first COUNT frisch puzzles (0: all 18)")
    args = p.parse_args()
    from solvers.warm import warm_all

    warm_all()
    lines = FRISCH.read_text().split()
    lines = lines[: args.count] if args.count else lines
    endgames = [float(x) for x in args.endgames.split(",")]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    records = []
    with OUT.open("a") as out:
        for i, line in enumerate(lines):
            for seed in range(1, args.seeds + 1):
                order = endgames if (i + seed) % 2 == 0 else endgames[::-1]  # interleaved, alternating
                for endgame in order:
                    rec = {
                        "puzzle": i,
                        **run(line, endgame, args.time_limit, seed),
                        "load": os.getloadavg()[0],
                    }
                    records.append(rec)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
            print(
                f"#{i}: "
                + ", ".join(
                    f"{r['endgame']}:{r['status'][:3]} {r['cost']}"
                    for r in records[-len(endgames) * args.seeds :]
                ),
                flush=True,
            )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    table(records)


if __name__ == "__main__":
    main()
