"""Read a job's results into pandas: counts by status, the slowest puzzles, each solver's times.

    pip install '.[dataframe]'        # pandas and pyarrow
    python examples/dataframe.py [CORPUS] [--broker redis://host:6379/0] [--portfolio race]

`Job.to_pandas()` waits for every puzzle, then holds one row per puzzle with the record fields
(`line`, `input`, `index`, `puzzle`, `status`, `solution`, `cost`, `solver`, `time_ms`, `error`,
`nodes`, `guesses`, `restarts`, `counters` as JSON text), typed as in the Parquet output.
`Job.to_arrow()` gives the Arrow table itself, `Job.to_polars()` a polars DataFrame, and
`solve_many(...)` returns results with the same three methods.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from client import BatchClient
from solvers import solve_many

SAMPLE = Path(__file__).resolve().parent.parent / "client" / "samples" / "sample.txt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", default=str(SAMPLE))
    ap.add_argument("--broker", default=None)
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--portfolio", default=None)
    args = ap.parse_args()

    with BatchClient(args.broker) as client:
        job = client.submit(args.corpus, time_limit=args.time_limit, portfolio=args.portfolio)
        try:
            frame = job.to_pandas()  # in input order; readable again for result_ttl
        except ImportError as exc:  # one line naming the extra to install
            raise SystemExit(str(exc)) from None
        if not client.embedded:
            job.purge()

    print(f"{len(frame)} puzzles from {args.corpus}")
    print(frame["status"].value_counts().to_string())
    slowest = frame.nlargest(5, "time_ms")[["line", "status", "solver", "time_ms", "nodes"]]
    print("slowest:\n" + slowest.to_string(index=False))
    answered = frame[frame["solver"].notna()]
    print("time_ms by solver:\n" + answered.groupby("solver")["time_ms"].describe().to_string())
    worst = frame.loc[frame["time_ms"].idxmax()]
    print(f"line {worst['line']}'s counters: {json.loads(worst['counters'])}")  # per member, as JSON text

    lines = frame["puzzle"].head(3).tolist()
    small = solve_many(lines, time_limit=1).to_pandas()  # the same columns, without a job
    print(small[["index", "status", "solver", "time_ms"]].to_string(index=False))


if __name__ == "__main__":
    main()
