"""Learned shares: per grid side, the share of the race's work each member gets.

Why: a race that gives a member that never wins a share of the time is that much slower
than its best member alone, and which member pays off depends on the grid size. The
table is measured, not tuned by hand: `bench/portfolio.py large --train` runs each member
alone on training grids of each size (bench/hard_sets.py: seeds apart from the evidence
sets), and `bench/portfolio.py learn` picks the shares that minimise the race's PAR-2
score predicted from those runs, keeping its predicted median within 5% of the best
member's, and writes `LEARNED` below. A side between learned sides takes the nearest
one's shares; sides below the smallest learned one keep the portfolio's own weights.

Learned (38 training grids, docs/decisions.md): from 25x25 on, CaDiCaL in its stable mode
(`sat`) solved every training grid any member solved, and sooner (frisch: 18/18, median
0.8 s, against the kernel's 11/18 and the focused mode's median 2.0 s), so it takes all
the work but the stochastic members' 0.5% each (the approximate grid at the deadline).
The exact member keeps the fast path (`PortfolioSpec.fast_budget`) at every size.
"""

from __future__ import annotations

# side -> member -> share (summing to 1); written by `bench/portfolio.py learn`
LEARNED: dict[int, dict[str, float]] = {
    25: {"sat-rows": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
    36: {"sat": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
    49: {"sat": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
    64: {"sat-rows": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
}


def learned_shares(n: int) -> dict[str, float] | None:
    """Return the learned shares for grid side n (the nearest learned side's), or None below them."""
    if not LEARNED or n < min(LEARNED):
        return None
    side = min(LEARNED, key=lambda s: (abs(s - n), s))
    return LEARNED[side]
