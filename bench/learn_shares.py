"""Learn the race's shares per grid size from runs of each member alone (`bench/portfolio.py learn`).

Model: a member given a share s of the race's work reaches its own solution after t/s
seconds (t: its time alone), so the race solves a puzzle at the least t_m/s_m over its
members, or not at all when that exceeds the limit. The shares of the complete members
(the exact kernel and the SAT modes; at most `MIX_MAX` of them at once) are searched on a grid
of steps of 0.01, after a fixed `STOCHASTIC_SHARE` for the stochastic members (they never solved
a grid from 25x25 in the training runs, but hold the approximate grid when time runs out); the
shares kept minimise the predicted PAR-2 score among those whose predicted median is within
`MEDIAN_SLACK` of the best member's alone (the issue allows 10%; the model ignores the race's own overhead).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.contract.tasks import DEFAULT_ESCALATE_AFTER_S as HELPER_DELAY  # seconds before helpers join
from solvers.shares import own_member

STOCHASTIC = ("annealing", "evolution", "progressive")
STOCHASTIC_SHARE = 0.002  # each: first runs after ~1.5 s of the others' work (a 36x36 race: ~0.6 s)
MEDIAN_SLACK = 1.05
STEP = 0.01
# complete members with a share in one candidate mix: every grid of steps over 7 members is 10^10 mixes,
# over 3 of them 2*10^5 (no side has learned more than 2)
MIX_MAX = 3
LATE_STARTS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0)  # seconds of the race's work before a late member joins
LATE_STEP = 0.05  # a late member's share, in steps of this ...
LATE_SHARE_MAX = 0.5  # ... up to this
CUT_SHORT = 0.98  # a failed run that spent less of its CPU limit than this was cut short by its wall deadline
# side -> the first helpers' modes, measured on workers and kept (the greedy orders the rest): at 25x25
# helper 1 on `sat-plain-fewest`, the owner's late member from the start (2 workers: frisch 10.4 s against
# 13.9 for the greedy's own `sat-rows`, docs/decisions.md)
HELPERS_KEPT: dict[int, tuple[str, ...]] = {25: ("sat-plain-fewest",)}
SIDES = {"frisch": 25, "acs25": 25, "q36": 36, "q49": 49, "q64": 64}


def solved(rec: dict[str, Any]) -> bool:
    """Whether a record is solved within its CPU limit (the bench gives a run more wall time
    than its limit, `--wall-factor`, so that a loaded machine does not cut its CPU short)."""
    return rec["status"] == "solved" and rec["cpu"] <= rec["limit"]


def conclusive(rec: dict[str, Any]) -> bool:
    """Whether a record settles its puzzle: solved within its CPU limit, or not solved after
    spending all of it (a run the wall deadline cut short on a loaded machine does not)."""
    return solved(rec) or rec["cpu"] >= CUT_SHORT * rec["limit"]


def par2(recs: Sequence[dict[str, Any]]) -> float:
    """CPU seconds summed over the records, an unsolved puzzle counting twice its limit."""
    return sum(r["cpu"] if solved(r) else 2 * r["limit"] for r in recs)


def reach(t: float, share: float, *, late: float = 0.0, start: float = 0.0, is_late: bool = False) -> float:
    """The race's CPU time at which a member with `share` has done its own `t` seconds. With a late
    member (holding `late` of the shares, joining once the race has done `start` seconds of work),
    the others share the race without it until then (this one at share / (1 - late)); the late
    member itself gets nothing until `start`."""
    if start <= 0 or late <= 0:
        return t / share
    if is_late:
        return start + t / share
    early = share / (1.0 - late)
    return t / early if t <= start * early else start + (t - start * early) / share


def predict(
    times: dict[str, list[float | None]],
    shares: dict[str, float],
    limit: float,
    starts: dict[str, float] | None = None,
) -> list[float]:
    """The race's predicted CPU time per puzzle (2 x limit when unsolved) for these shares; `starts`
    (at most one member) delays that member until the race has done so many seconds of work."""
    starts = {m: w for m, w in (starts or {}).items() if w > 0 and shares.get(m, 0) > 0}
    if len(starts) > 1:
        raise ValueError("the model delays one member at most")
    late_member, start = next(iter(starts.items()), (None, 0.0))
    late = shares[late_member] if late_member is not None else 0.0
    count = len(next(iter(times.values())))
    out = []
    for i in range(count):
        best = min(
            (
                reach(t[i], shares[m], late=late, start=start, is_late=m == late_member)
                for m, t in times.items()
                if shares.get(m, 0) > 0 and t[i] is not None
            ),
            default=None,
        )
        out.append(best if best is not None and best <= limit else 2 * limit)
    return out


def member_times(recs: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Each complete member's CPU time alone per puzzle of one training set (None: not solved in the limit),
    the puzzles in index order."""
    complete = sorted({r["config"] for r in recs} - {"race", "cpsat", "plain", *STOCHASTIC})
    indices = sorted({r["index"] for r in recs})
    times: dict[str, list[float | None]] = {}
    for m in complete:
        by_index = {r["index"]: r for r in recs if r["config"] == m}
        if set(by_index) != set(indices):
            raise SystemExit(f"member {m} lacks training runs on some puzzles of the set")
        times[m] = [by_index[i]["cpu"] if solved(by_index[i]) else None for i in indices]
    return times


def learn_set(recs: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """The shares for one training set's records (each member alone on every puzzle), and the late
    start of one member if that predicts better (member -> seconds of the race's work before it)."""
    times = member_times(recs)
    complete = list(times)
    limit = max(r["limit"] for r in recs)
    rest = 1.0 - STOCHASTIC_SHARE * len(STOCHASTIC)
    alone = {m: statistics.median(predict({m: times[m]}, {m: 1.0}, limit)) for m in complete}
    bound = MEDIAN_SLACK * min(alone.values())

    def key(shares: dict[str, float], starts: dict[str, float]) -> tuple[int, float]:
        race = predict(times, shares, limit, starts)
        median = statistics.median(race)
        return (0, sum(race)) if median <= bound else (1, median)

    steps = round(1 / STEP)

    def candidates() -> Iterator[tuple[dict[str, float], dict[str, float]]]:
        for size in range(1, min(MIX_MAX, len(complete)) + 1):
            for mix in itertools.combinations(complete, size):
                for split in itertools.product(range(1, steps), repeat=size - 1):
                    if sum(split) < steps:
                        parts = [*split, steps - sum(split)]
                        yield {m: rest * k / steps for m, k in zip(mix, parts, strict=True)}, {}
        for main, late in itertools.permutations(complete, 2):  # a second member joining late
            for k in range(1, round(LATE_SHARE_MAX / LATE_STEP) + 1):
                share = k * LATE_STEP
                for start in LATE_STARTS:
                    yield {main: rest * (1 - share), late: rest * share}, {late: start}

    shares, starts = min(candidates(), key=lambda c: key(*c))
    kept = {m: round(s, 3) for m, s in shares.items() if s > 0}
    return {**kept, **{m: STOCHASTIC_SHARE for m in STOCHASTIC}}, starts


def helper_order(
    recs: list[dict[str, Any]], shares: dict[str, float], starts: dict[str, float], first: Sequence[str] = ()
) -> tuple[str, ...]:
    """The SAT modes helpers race in turn (`solvers.shares.helper_shares`), for the owner racing `shares`
    with `starts`: each the mode that most lowers the predicted PAR-2 of the first to finish among the
    owner, the helpers before it and itself, a helper joining `HELPER_DELAY` seconds in (ties: its PAR-2
    alone, then its median). Why: a helper wins only the grids on which it beats the owner, so a mode fast
    on the grids the owner already finds adds nothing, and one slower on average but fast where the owner
    is stuck halves the tail (q64: `sat-plain-false`, docs/decisions.md). The owner's own member racing
    from the start is left out: a helper running it would search as the owner does. `first`: helpers kept
    as they are (`HELPERS_KEPT`), the greedy choosing after them."""
    times = member_times(recs)
    limit = max(r["limit"] for r in recs)
    own = own_member(shares, starts)
    first_answer = predict(times, shares, limit, starts)
    alone = {
        m: predict({m: t}, {m: 1.0}, limit) for m, t in times.items() if m.startswith("sat") and m != own
    }
    order: list[str] = []
    for pick in first:
        first_answer = joined(first_answer, alone.pop(pick), limit)
        order.append(pick)
    while alone:
        races = {m: joined(first_answer, a, limit) for m, a in alone.items()}
        pick = min(alone, key=lambda m: (sum(races[m]), sum(alone[m]), statistics.median(alone[m]), m))
        first_answer = races[pick]
        del alone[pick]
        order.append(pick)
    return tuple(order)


def joined(first: list[float], helper: list[float], limit: float) -> list[float]:
    """Per puzzle, the time the first of a race (`first`) and a helper joining it `HELPER_DELAY` seconds in
    answers (2 x limit: neither solves it)."""
    return [min(f, h + HELPER_DELAY if h < 2 * limit else h) for f, h in zip(first, helper, strict=True)]


class Learned(NamedTuple):
    """What `learn` derives per grid side: shares, the SAT modes helpers race, late starts."""

    shares: dict[int, dict[str, float]]
    helpers: dict[int, tuple[str, ...]]
    starts: dict[int, dict[str, float]]


def learn(recs: list[dict[str, Any]]) -> Learned:
    """Shares, helper orders and late starts per grid side, from the training records of every set."""
    out = Learned({}, {}, {})
    for sname in sorted({r["set"] for r in recs}, key=lambda s: SIDES[s]):
        mine = [r for r in recs if r["set"] == sname]
        side = SIDES[sname]
        out.shares[side], out.starts[side] = learn_set(mine)
        kept = HELPERS_KEPT.get(side, ())
        out.helpers[side] = helper_order(mine, out.shares[side], out.starts[side], kept)
        learned = f"{out.shares[side]}; late {out.starts[side]}; helpers {out.helpers[side]}"
        print(f"{sname} ({side}x{side}): {learned}")
    return out


def write_shares(learned: Learned, path: Path) -> None:
    """Replace the `LEARNED`, `LATE_START` and `HELPER_ORDER` tables in solvers/shares.py, keeping the
    sides with no training records (a size retrained alone leaves the others as they were)."""
    from solvers.shares import HELPER_ORDER, LATE_START, LEARNED

    text = path.read_text()
    tables = (
        ("LEARNED", r"dict\[int, dict\[str, float\]\]", {**LEARNED, **learned.shares}),
        ("LATE_START", r"dict\[int, dict\[str, float\]\]", {**LATE_START, **learned.starts}),
        ("HELPER_ORDER", r"dict\[int, tuple\[str, \.\.\.\]\]", {**HELPER_ORDER, **learned.helpers}),
    )
    for name, kind, merged in tables:
        rows = "\n".join(
            f"    {side}: ({', '.join(map(repr, row))}{',' if len(row) == 1 else ''}),"
            if isinstance(row, tuple)
            else f"    {side}: {{{', '.join(f'{m!r}: {s}' for m, s in row.items())}}},"
            for side, row in sorted(merged.items())
            if row or name != "LATE_START"
        ).replace("'", '"')
        body = f"\n{rows}\n" if rows else ""
        pattern = rf"({name}: {kind} = \{{)(?:\n.*?\n)?(\}})"  # `{}`, or rows up to a `}` opening a line
        text, count = re.subn(pattern, rf"\g<1>{body}\g<2>", text, count=1, flags=re.S)
        if count != 1:
            raise SystemExit(f"no {name} table found in {path}")
    path.write_text(text)
    print(f"wrote {path}")
