"""Kernel status codes (int8), in a leaf module so every kernel module can import them."""

DONE = 0  # search space exhausted: the count is exact (0 means unsolvable)
LIMIT = 1  # stopped after finding `limit` solutions
TIMEOUT = 2  # the per-puzzle time limit or the batch deadline passed
BUDGET = 3  # the node budget was spent
STOPPED = 4  # the stop flag was raised
STATUS_NAMES = {DONE: "done", LIMIT: "limit", TIMEOUT: "timeout", BUDGET: "budget", STOPPED: "stopped"}
