"""`python -m worker.warm`: compile and cache every numba kernel once (image build, CI, before a worker).

A kernel compiled cold can take seconds, and compiling cannot be interrupted by a
deadline, so everything a worker may run is compiled here, ahead of the first chunk.
"""

from __future__ import annotations

import os
import sys
import time


def warm_all() -> None:
    """Compile (or load from the cache) the exact, stochastic, chunk and generator kernels."""
    import numpy as np

    from solvers.chunk import warm
    from solvers.exact import EXACT_SOLVERS
    from solvers.generator import generate_chunk
    from solvers.portfolio import warm_up
    from solvers.puzzle import Box

    warm()  # the default solver (generic and 9x9 kernels) and the record renderer
    for solver in EXACT_SOLVERS.values():
        solver.solve_batch(np.zeros((1, 16), dtype=np.uint8), Box(2, 2), limit=2, keep=1, max_nodes=1000)
    warm_up()  # the stochastic members of the portfolios
    generate_chunk(Box(3, 3), 2, 1, unique=True)


def main() -> int:
    """Warm the numba cache (under NUMBA_CACHE_DIR when set); print where and how long it took."""
    start = time.perf_counter()
    warm_all()
    where = os.environ.get("NUMBA_CACHE_DIR", "next to the installed modules")
    print(f"numba cache warm in {time.perf_counter() - start:.1f} s ({where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
