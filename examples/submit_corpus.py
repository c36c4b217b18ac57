"""Submit a corpus, stream its results, and print a summary.

    python examples/submit_corpus.py [CORPUS] [--broker redis://host:6379/0] [--portfolio race]

Without a broker (argument or SUDOKU_BATCH_BROKER) the job runs embedded on this machine.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from client import BatchClient

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
        print(f"job {job.id} ({'embedded' if client.embedded else 'broker'})")
        statuses: Counter[str] = Counter()
        slowest = (0.0, None)
        for result in job.results():  # streamed as chunks arrive
            statuses[result.status] += 1
            if result.time_ms is not None and result.time_ms > slowest[0]:
                slowest = (result.time_ms, result)
            if result.status == "invalid":
                print(f"  {result.input}:{result.line}: {result.error}")
        status = job.status()
        print(
            f"{status.done} puzzles, {status.rate:,.0f} puzzles/s: "
            + ", ".join(f"{k} {v}" for k, v in statuses.items())
        )
        if slowest[1] is not None:
            print(f"slowest: line {slowest[1].line} in {slowest[0]:.2f} ms by {slowest[1].solver}")
        if not client.embedded:
            job.purge()


if __name__ == "__main__":
    main()
