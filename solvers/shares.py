"""Learned shares: per grid side, the share of the race's work each member gets.

Why: a race that gives a member that never wins a share of the time is that much slower than its
best member alone, and which member pays off depends on the grid size. The tables are measured, not
tuned by hand: `bench/portfolio.py learn` writes them from training runs of each member alone,
minimising the predicted PAR-2 with the median within 5% of the best member's (the figures:
docs/decisions.md). A side between learned sides takes the nearest one's shares; sides below the
smallest keep the portfolio's own weights. `LATE_START`: a second member that joins once the race
has done W seconds of work, so it halves the tail without slowing the easy grids.
"""

from __future__ import annotations

from typing import NamedTuple

# side -> member -> share (summing to 1); written by `bench/portfolio.py learn`
LEARNED: dict[int, dict[str, float]] = {
    25: {
        "sat-plain": 0.497,
        "sat-plain-fewest": 0.497,
        "annealing": 0.002,
        "evolution": 0.002,
        "progressive": 0.002,
    },
    36: {"sat": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
    49: {"sat-rows": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
    64: {"sat-rows-false": 0.994, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
}


# side -> member -> CPU seconds of the race's work before that member joins (absent: from the start);
# written by `bench/portfolio.py learn`
LATE_START: dict[int, dict[str, float]] = {
    25: {"sat-plain-fewest": 2.0},
}


def _nearest_side(n: int) -> int | None:
    """The learned side nearest n (the smaller on a tie), or None below the learned sides."""
    if not LEARNED or n < min(LEARNED):
        return None
    return min(LEARNED, key=lambda s: (abs(s - n), s))


def learned_shares(n: int) -> dict[str, float] | None:
    """Return the learned shares for grid side n (the nearest learned side's), or None below them."""
    side = _nearest_side(n)
    return None if side is None else LEARNED[side]


def late_starts(n: int) -> dict[str, float]:
    """Return the learned late starts for grid side n (the nearest learned side's; {} for none)."""
    side = _nearest_side(n)
    return {} if side is None else LATE_START.get(side, {})


# side -> the SAT modes helpers race instead of the owner's, in turn (written by `bench/portfolio.py learn`):
# each the one that most lowers the predicted PAR-2 of the first of the owner and the helpers before it
# to answer. 49, 64: so learned on 2026-11-29; 36: by each mode's PAR-2 alone (2026-11-26); 25: helper 1
# kept on `sat-plain-fewest` (`bench/learn_shares.py` `HELPERS_KEPT`: the greedy's own first, `sat-rows`,
# lost on 2 workers, 13.9 s against 10.4 over frisch #0, #8, #9, #14), the rest so learned (docs/decisions.md)
HELPER_ORDER: dict[int, tuple[str, ...]] = {
    25: ("sat-plain-fewest", "sat-plain-false", "sat-rows", "sat-rows-false", "sat"),
    36: ("sat", "sat-rows", "sat-plain-fewest", "sat-plain"),
    49: ("sat", "sat-rows-false", "sat-plain", "sat-plain-fewest", "sat-plain-false"),
    64: ("sat-plain", "sat-rows", "sat-plain-false", "sat", "sat-plain-fewest"),
}


class HelperMix(NamedTuple):
    """A race's shares (None: the members' own weights), whether its complete members renumber their
    literals, and its late starts (member -> seconds of work; the owner's only)."""

    shares: dict[str, float] | None
    renumber: bool
    starts: dict[str, float] | None = None


# side -> the first helper that searches cubes of a split (`solvers.race.cubes`) instead of racing another SAT
# mode: the helpers before it race the modes of `helper_shares`, those from it on split the search (64:
# helper 1 races `sat-plain`, which answers where the owner's `sat-rows-false` is slow; 25: helpers 1-4 race
# the four modes that complement the owner, 4 helpers on frisch x0.31 of 1 worker, x0.43 with cubes from
# helper 2: docs/decisions.md)
CUBES_FROM: dict[int, int] = {25: 5, 36: 1, 49: 1, 64: 2}
CUBES_PER_HELPER = 2  # a split makes at least this many cubes per helper searching cubes
MIN_CUBES = 2


def helper_cubes(n: int, helper: int, helpers: int | None = None) -> int:
    """The cubes helper `helper` of a race on grid side n asks a split for (0: it races another mode,
    `helper_shares`), when `helpers` are called in all (default: `helper`)."""
    side = _nearest_side(n)
    if side is None or helper < CUBES_FROM.get(side, 1 << 30):
        return 0
    splitting = max(helper, helpers or helper) - CUBES_FROM[side] + 1
    return min(64, max(MIN_CUBES, CUBES_PER_HELPER * splitting))


def cube_shares(n: int) -> HelperMix | None:
    """The mix of a helper searching cubes on grid side n (None below the learned sides): the owner's own
    SAT mode in its own order with every SAT share, from the start: the cubes already make the searches
    differ, and that mode was learned fastest at that side."""
    side = _nearest_side(n)
    return None if side is None else HelperMix(_moved(side), False)


def helper_shares(n: int, variant: int) -> HelperMix | None:
    """Helper `variant`'s mix for grid side n (None below the learned sides): the k-th mode of `HELPER_ORDER`
    but the owner's own (its member racing from the start) alone, with every SAT share, from the start, in
    its own order; past the end, cycling renumbered: a helper running the owner's member would search
    nearly the same way."""
    side = _nearest_side(n)
    if side is None or variant <= 0:
        return None
    shares = LEARNED[side]
    others = [m for m in HELPER_ORDER.get(side, ()) if m != _own(side)]
    if not others:
        return HelperMix(shares, True)
    return HelperMix(_moved(side, others[(variant - 1) % len(others)]), variant > len(others))


def own_member(shares: dict[str, float], starts: dict[str, float]) -> str:
    """The owner's member racing from the start under `shares` and late `starts` (its largest share not
    starting late): the one member a helper would only repeat."""
    return max(shares, key=lambda m: (m not in starts, shares[m], m))


def _own(side: int) -> str:
    """The owner's SAT member racing from the start at `side`."""
    return own_member(LEARNED[side], LATE_START.get(side, {}))


def _moved(side: int, pick: str | None = None) -> dict[str, float]:
    """The learned shares at `side` with every SAT share of the owner (its member racing from the start and
    its late ones) given to `pick` (None: to the member racing from the start)."""
    shares = LEARNED[side]
    late = [m for m in LATE_START.get(side, {}) if m in shares]
    own = _own(side)
    moved = {m: s for m, s in shares.items() if m != own and m not in late}
    moved[pick or own] = shares[own] + sum(shares[m] for m in late)
    return moved
