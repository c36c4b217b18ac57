"""`python -m worker.warm`: compile and cache every numba kernel once (image build, CI, before a worker), as
`sudoku-batch warm` does: a cold compile takes seconds and no deadline can interrupt it.
"""

from __future__ import annotations

import os
import sys
import time

from pipeline.engine.solve import warm_all


def main() -> int:
    """Warm the numba cache (under NUMBA_CACHE_DIR when set); print where and how long it took."""
    start = time.perf_counter()
    warm_all()
    where = os.environ.get("NUMBA_CACHE_DIR", "next to the installed modules")
    print(f"numba cache warm in {time.perf_counter() - start:.1f} s ({where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
