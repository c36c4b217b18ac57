"""The exact solvers: importing this package fills `EXACT_SOLVERS` with every one of them.

`propagation` is the default (`DEFAULT_EXACT`); `backtracking`, `digitwise` and
`exact_cover` are the alternatives, raced or compared against it.
"""

from solvers.exact import backtracking, digitwise, exact_cover, propagation  # noqa: F401 - each registers itself
from solvers.exact.base import EXACT_SOLVERS

__all__ = ["EXACT_SOLVERS"]
