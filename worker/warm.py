"""`python -m worker.warm`: compile and cache every numba kernel once (image build, CI, before a worker).

The same as `sudoku-batch warm` (`pipeline.engine.solve.warm_all`), kept for images and units that call it.
A kernel compiled cold can take seconds, and compiling cannot be interrupted by a
deadline, so everything a worker may run is compiled here, ahead of the first chunk.
"""

from __future__ import annotations

import os
import sys
import time

from pipeline.engine.solve import warm_all

__all__ = ["main", "warm_all"]


def main() -> int:
    """Warm the numba cache (under NUMBA_CACHE_DIR when set); print where and how long it took."""
    start = time.perf_counter()
    warm_all()
    where = os.environ.get("NUMBA_CACHE_DIR", "next to the installed modules")
    print(f"numba cache warm in {time.perf_counter() - start:.1f} s ({where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
