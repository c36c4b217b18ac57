"""`python -m worker.warm`: compile and cache the numba kernels once (at image build, or before a worker)."""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    """Warm the numba cache (under NUMBA_CACHE_DIR when set); print where and how long it took."""
    from solvers.chunk import warm

    start = time.perf_counter()
    warm()
    where = os.environ.get("NUMBA_CACHE_DIR", "next to the installed modules")
    print(f"numba cache warm in {time.perf_counter() - start:.1f} s ({where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
