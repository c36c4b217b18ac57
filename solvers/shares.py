"""Learned shares: per grid side, the share of the race's work each member gets.

Why: a race that gives a member that never wins a share of the time is that much slower
than its best member alone, and which member pays off depends on the grid size. The
table is measured, not tuned by hand: `bench/portfolio.py large --train` runs each member
alone on training grids of each size (bench/hard_sets.py: seeds apart from the evidence
sets), and `bench/portfolio.py learn` picks the shares that minimise the race's PAR-2
score predicted from those runs, keeping its predicted median within 5% of the best
member's, and writes `LEARNED` below. A side between learned sides takes the nearest
one's shares; sides below the smallest learned one keep the portfolio's own weights.

Late starts (`LATE_START`): the learner also tries one second member that joins only once the
race has done W seconds of work (W from 0.5 to 8 s, its share up to half): the members trade
median for tail (frisch: `sat-plain` median 0.93 s but PAR-2 53.7, `sat-plain-fewest` 1.35 s
and 34.6), and a second search that ran from the start would slow every easy grid by its share.
Held back, it costs nothing on the grids the first member settles within W and halves the tail
of the others. The race holds it back by starting its clock late (`solvers.race.portfolio`).

Learned: at 36x36 and 49x49 from issue 16's first training rounds (24 and 12 grids: a SAT
mode solved every grid any member solved; the kernel was first on 3 of the 24 36x36 grids, by
0.17-0.39 s, too little for a share to pay): `sat` (fewest-candidates-first literal order) at
36x36, `sat-rows` (cell-major order) at 49x49. At 25x25 and 64x64 retrained with `sat-plain`
(no restarts, rephasing or inprocessing; 2026-11-26): frisch 18/18 for all three modes, PAR-2
`sat` 45.2, `sat-rows` 49.1, `sat-plain` 53.7 but medians 1.50, 1.26, 0.93 s, so `sat-plain`
(the others break the median bound); 6 64x64 training grids: `sat-plain` 5/6, PAR-2 139.8,
median 4.0 s, `sat-rows` 5/6 (not the same five) 152.3, `sat` 4/6 282.0. A SAT mode takes all
the work but the stochastic members' 0.2% each (the approximate grid when time runs out). The
exact member keeps the fast path at every size. Late starts learned 2026-11-26 (frisch with
`sat-plain-fewest` added): at 25x25 `sat-plain-fewest` joins after 2 s with half the work
(predicted frisch PAR-2 45.5, median 0.94 s; frisch is the training and the evidence set at
25x25: no second set of its kind), at 64x64 `sat-rows` after 5 s with half (it solves the
training grid `sat-plain` leaves; retrained once 64x64 CNFs ran without elimination and probing:
`sat-rows` 6/6, median 5.1 s, `sat-plain` 5/6, median 4.0 s: the median bound keeps `sat-plain`
first). 36x36 and 49x49 retrained with all four SAT modes the same day: at 49 the shares stayed
(`sat-rows` 10/12; `sat-plain` and `sat-plain-fewest` 3/12); at 36 the learner chose
`sat-plain-fewest` (training median 0.64 s, `sat` 0.76) with `sat-rows` late after 1 s, which on
the 24 evidence grids scored PAR-2 32.6 against 17.7 for the `sat` shares (0.55x CP-SAT against
0.30x): the 36x36 row keeps the first round's shares (`learn --sets frisch,q49,q64` leaves it).
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
    64: {"sat-plain": 0.497, "sat-rows": 0.497, "annealing": 0.002, "evolution": 0.002, "progressive": 0.002},
}


# side -> member -> CPU seconds of the race's work before that member joins (absent: from the start);
# written by `bench/portfolio.py learn`
LATE_START: dict[int, dict[str, float]] = {
    25: {"sat-plain-fewest": 2.0},
    64: {"sat-rows": 5.0},
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


# side -> the SAT modes helpers race instead of the owner's, best first: by PAR-2 alone in training
# (written by `bench/portfolio.py learn`; every SAT mode trained at every side, 2026-11-26)
HELPER_ORDER: dict[int, tuple[str, ...]] = {
    25: ("sat-plain-fewest", "sat", "sat-rows", "sat-plain"),
    36: ("sat", "sat-rows", "sat-plain-fewest", "sat-plain"),
    49: ("sat-rows", "sat", "sat-plain-fewest", "sat-plain"),
    64: ("sat-rows", "sat-plain", "sat"),
}


class HelperMix(NamedTuple):
    """A race's shares (None: the members' own weights), whether its complete members renumber
    their literals, and the late starts it keeps (member -> seconds of work; the owner's only)."""

    shares: dict[str, float] | None
    renumber: bool
    starts: dict[str, float] | None = None


# side -> the first helper that searches cubes of a split (`solvers.race.cubes`) instead of racing another SAT
# mode: the helpers before it race the modes of `helper_shares`, those from it on split the search
CUBES_FROM: dict[int, int] = {25: 2, 36: 1, 49: 1, 64: 1}
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
    """The mix of a helper searching cubes on grid side n (None below the learned sides): the owner's
    own SAT mode (the one racing from the start) in its own literal order, with every SAT share of
    the owner, from the start. Why the owner's mode: the cubes already make the searches differ, and
    the owner's mode is the one learned fastest at that side (docs/decisions.md, the split)."""
    side = _nearest_side(n)
    return None if side is None else HelperMix(_moved(side), False)


def helper_shares(n: int, variant: int) -> HelperMix | None:
    """Return helper `variant`'s mix for grid side n (None below the learned sides). Why: a helper
    running the owner's own members searches nearly the same way (a SAT mode's conflicts to a
    solution vary little with the literal order), and the owner's late member only starts after
    its late start. So helper k races the k-th other SAT mode alone, with every SAT share of the
    owner, from the start, in that mode's own literal order: the owner's late members first (what
    the owner reaches last, a helper runs at once), then `HELPER_ORDER`'s modes the owner does not
    race; helpers past the end of that list cycle through it again, renumbered."""
    side = _nearest_side(n)
    if side is None or variant <= 0:
        return None
    shares = LEARNED[side]
    others = [m for m in LATE_START.get(side, {}) if m in shares]
    others += [m for m in HELPER_ORDER.get(side, ()) if m not in shares]
    if not others:
        return HelperMix(shares, True)
    return HelperMix(_moved(side, others[(variant - 1) % len(others)]), variant > len(others))


def _moved(side: int, pick: str | None = None) -> dict[str, float]:
    """The learned shares at `side` with every SAT share of the owner (its member racing from the start and
    its late ones) given to `pick` (None: to the member racing from the start)."""
    shares = LEARNED[side]
    late = [m for m in LATE_START.get(side, {}) if m in shares]
    own = max(shares, key=lambda m: (m not in late, shares[m], m))
    moved = {m: s for m, s in shares.items() if m != own and m not in late}
    moved[pick or own] = shares[own] + sum(shares[m] for m in late)
    return moved
