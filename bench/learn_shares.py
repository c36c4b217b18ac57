"""Learn the race's shares per grid size from runs of each member alone (`bench/portfolio.py learn`).

Model: a member given a share s of the race's work reaches its own solution after t/s
seconds (t: its time alone), so the race solves a puzzle at the least t_m/s_m over its
members, or not at all when that exceeds the limit. The shares of the complete members
(the exact kernel and the SAT modes) are searched on a grid of steps of 0.01, after a fixed
`STOCHASTIC_SHARE` for the stochastic members (they never solved a grid from 25x25 in the
training runs, but hold the approximate grid when time runs out); the shares kept minimise
the predicted PAR-2 score among those whose predicted median is within `MEDIAN_SLACK` of the
best member's alone (the issue allows 10%; the model ignores the race's own overhead).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STOCHASTIC = ("annealing", "evolution", "progressive")
STOCHASTIC_SHARE = 0.002  # each: first runs after ~1.5 s of the others' work (a 36x36 race: ~0.6 s)
MEDIAN_SLACK = 1.05
STEP = 0.01
CUT_SHORT = 0.98  # a failed run that spent less of its CPU limit than this was cut short by its wall deadline
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


def predict(times: dict[str, list[float | None]], shares: dict[str, float], limit: float) -> list[float]:
    """The race's predicted CPU time per puzzle (2 x limit when unsolved) for these shares."""
    count = len(next(iter(times.values())))
    out = []
    for i in range(count):
        best = min(
            (t[i] / shares[m] for m, t in times.items() if shares.get(m, 0) > 0 and t[i] is not None),
            default=None,
        )
        out.append(best if best is not None and best <= limit else 2 * limit)
    return out


def learn_set(recs: list[dict[str, Any]]) -> dict[str, float]:
    """The shares for one training set's records (each member alone on every puzzle)."""
    complete = sorted({r["config"] for r in recs} - {"race", "cpsat", "plain", *STOCHASTIC})
    limit = max(r["limit"] for r in recs)
    indices = sorted({r["index"] for r in recs})
    times: dict[str, list[float | None]] = {}
    for m in complete:
        by_index = {r["index"]: r for r in recs if r["config"] == m}
        if set(by_index) != set(indices):
            raise SystemExit(f"member {m} lacks training runs on some puzzles of the set")
        times[m] = [by_index[i]["cpu"] if solved(by_index[i]) else None for i in indices]
    rest = 1.0 - STOCHASTIC_SHARE * len(STOCHASTIC)
    alone = {m: statistics.median(predict({m: times[m]}, {m: 1.0}, limit)) for m in complete}
    bound = MEDIAN_SLACK * min(alone.values())
    steps = round(1 / STEP)
    best: tuple[float, float, dict[str, float]] | None = None
    for split in itertools.product(range(steps + 1), repeat=len(complete) - 1):
        if sum(split) > steps:
            continue
        parts = [*split, steps - sum(split)]
        shares = {m: rest * k / steps for m, k in zip(complete, parts, strict=True)}
        race = predict(times, shares, limit)
        median = statistics.median(race)
        key = (0 if median <= bound else 1, sum(race) if median <= bound else median)
        if best is None or key < (best[0], best[1]):
            best = (key[0], key[1], shares)
    assert best is not None
    shares = {m: round(s, 3) for m, s in best[2].items() if s > 0}
    return {**shares, **{m: STOCHASTIC_SHARE for m in STOCHASTIC}}


def helper_order(recs: list[dict[str, Any]]) -> tuple[str, ...]:
    """The SAT modes of one training set, best first by PAR-2 alone (then median): the members
    helpers race in turn instead of the owner's (`solvers.shares.helper_shares`)."""
    limit = max(r["limit"] for r in recs)
    scores = []
    for m in sorted({r["config"] for r in recs if r["config"].startswith("sat")}):
        mine = [r for r in recs if r["config"] == m]
        alone = predict({m: [r["cpu"] if solved(r) else None for r in mine]}, {m: 1.0}, limit)
        scores.append((par2(mine), statistics.median(alone), m))
    return tuple(m for *_, m in sorted(scores))


def learn(recs: list[dict[str, Any]]) -> tuple[dict[int, dict[str, float]], dict[int, tuple[str, ...]]]:
    """Shares and helper orders per grid side, from the training records of every set."""
    table: dict[int, dict[str, float]] = {}
    helpers: dict[int, tuple[str, ...]] = {}
    for sname in sorted({r["set"] for r in recs}, key=lambda s: SIDES[s]):
        mine = [r for r in recs if r["set"] == sname]
        table[SIDES[sname]] = learn_set(mine)
        helpers[SIDES[sname]] = helper_order(mine)
        print(
            f"{sname} ({SIDES[sname]}x{SIDES[sname]}): {table[SIDES[sname]]}; helpers {helpers[SIDES[sname]]}"
        )
    return table, helpers


def write_shares(table: dict[int, dict[str, float]], helpers: dict[int, tuple[str, ...]], path: Path) -> None:
    """Replace the `LEARNED` and `HELPER_ORDER` tables in solvers/shares.py, keeping the sides
    with no training records (a size retrained alone leaves the others as they were)."""
    from solvers.shares import HELPER_ORDER, LEARNED

    text = path.read_text()
    for name, kind, merged in (
        ("LEARNED", r"dict\[int, dict\[str, float\]\]", {**LEARNED, **table}),
        ("HELPER_ORDER", r"dict\[int, tuple\[str, \.\.\.\]\]", {**HELPER_ORDER, **helpers}),
    ):
        rows = "\n".join(
            f"    {side}: ({', '.join(map(repr, row))}{',' if len(row) == 1 else ''}),"
            if isinstance(row, tuple)
            else f"    {side}: {{{', '.join(f'{m!r}: {s}' for m, s in row.items())}}},"
            for side, row in sorted(merged.items())
        ).replace("'", '"')
        text, count = re.subn(rf"({name}: {kind} = \{{\n).*?(\n\}})", rf"\g<1>{rows}\g<2>", text, flags=re.S)
        if count != 1:
            raise SystemExit(f"no {name} table found in {path}")
    path.write_text(text)
    print(f"wrote {path}")
