"""Learned shares: the race gives each member its share per grid size, replays them under a seed,
and the learning gives the time to what its training runs say pays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.learn_shares import STOCHASTIC_SHARE, helper_order, learn, learn_set, predict, write_shares
from solvers import shares as shares_module
from solvers.generate.generator import generate
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box, Puzzle
from solvers.race.portfolio import PRESETS, MemberSpec, PortfolioSpec, _build, race
from solvers.shares import HELPER_ORDER, LATE_START, LEARNED, helper_shares, learned_shares
from tests.test_portfolio import FRISCH

STOCHASTIC = ("annealing", "evolution", "progressive")
TIMES = ("time_ms", "time_to_best_ms", "time_to_solution_ms")


def holes_36x36() -> Puzzle:
    """A 36x36 grid with 55% of its cells blanked (the first q36 training grid of bench/hard_sets.py)."""
    box = Box(6, 6)
    return Puzzle(box, next(iter(generate(box, 1, seed=1036, holes=0.55))).puzzle)


def main_member(side: int) -> str:
    """The SAT mode racing from the start at this learned side (the largest share without a late start)."""
    shares, late = LEARNED[side], LATE_START.get(side, {})
    return max(shares, key=lambda m: (m not in late, shares[m], m))


def test_a_side_between_learned_sides_takes_the_nearest_and_below_them_none() -> None:
    assert learned_shares(9) is None and learned_shares(16) is None
    assert learned_shares(25) == LEARNED[25]
    assert learned_shares(30) == LEARNED[25]  # 5x6 boxes: nearer 25 than 36
    assert learned_shares(42) == LEARNED[36]
    assert all(sum(shares.values()) == pytest.approx(1.0) for shares in LEARNED.values())


def test_a_portfolio_without_learned_shares_keeps_its_own_weights_at_every_size() -> None:
    spec = PortfolioSpec(name="mine", members=PRESETS["race"].members)  # learned: False
    assert spec.weights(25) == [57.0, 171.0, 57.0, 57.0, 57.0, 57.0, 57.0, 1.0, 1.0, 1.0]
    assert spec.weights(9) == [
        3.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        1.0,
        1.0,
        1.0,
    ]  # the SAT members race from 25x25
    assert PRESETS["race"].weights(25) == [LEARNED[25].get(m.solver, 0.0) for m in spec.members]


def test_the_scheduler_keeps_every_members_work_per_weight_level_and_a_tiny_share_starts_late() -> None:
    spec = PortfolioSpec(
        name="3:1", members=(MemberSpec(solver="propagation", weight=3.0), MemberSpec(solver="annealing"))
    )
    trace: list[tuple[str, str, int]] = []
    r = race(parse_puzzle(FRISCH), spec, time_limit=0.6, seed=4, trace=trace)
    work = {name: c["work"] for name, c in r.counters.items()}
    assert work["propagation"] / 3.0 == pytest.approx(work["annealing"], rel=0.5)
    assert trace[0][0] == "propagation"  # the fast path
    members = _build(PRESETS["race"], holes_36x36(), seed=0)
    tiny = [m for m in members if m.name in STOCHASTIC]
    assert tiny and all(m.weight == STOCHASTIC_SHARE for m in tiny)
    sat = next(m for m in members if m.name == main_member(36))
    # next slice's end, in work per weight: the SAT member long before the stochastic ones
    assert (sat.vtime + 1) / sat.weight < 1 / STOCHASTIC_SHARE


def test_the_same_seed_gives_every_member_the_same_work_and_any_seed_keeps_the_sat_modes_own_order() -> None:
    puzzle = holes_36x36()

    def work(seed: int) -> tuple[str, dict[str, Any]]:
        r = race(puzzle, "race", time_limit=30, seed=seed)
        assert r.status == "solved"
        return r.solver or "", {
            k: {f: v for f, v in c.items() if f not in TIMES} for k, c in r.counters.items()
        }

    first, again, other = work(0), work(0), work(7)
    assert first == again
    # every job's chunks carry a seed: the owner's SAT search stays the one its mode was chosen for
    main = main_member(36)
    assert first[1][main]["conflicts"] == other[1][main]["conflicts"]
    sat_orders = [
        m.seed
        for s in (0, 7, 2**40 + 1)
        for m in _build(PRESETS["race"], puzzle, s)
        if m.name.startswith("sat")
    ]
    assert sat_orders and set(sat_orders) == {0}


def test_a_helper_races_the_next_sat_mode_in_its_own_order_and_helpers_past_the_list_renumber() -> None:
    puzzle = holes_36x36()
    own = learned_shares(36)
    assert own is not None
    main, late = main_member(36), [m for m in LATE_START.get(36, {}) if m in own]
    sat_share = own[main] + sum(own[m] for m in late)
    others = [m for m in HELPER_ORDER[36] if m != main]  # the learned order, but the owner's own member
    for variant in range(1, 2 * len(others) + 1):
        shares, renumber, _ = helper_shares(36, variant) or ({}, False, None)
        pick = others[(variant - 1) % len(others)]
        assert shares[pick] == pytest.approx(sat_share) and main not in shares
        assert renumber == (variant > len(others))
        sat = [
            m for m in _build(PRESETS["race"], puzzle, seed=5, variant=variant) if m.name.startswith("sat")
        ]
        assert [m.name for m in sat] == [pick]
        assert (sat[0].seed != 0) == renumber  # its mode's own numbering, until the list comes round again
    assert helper_shares(36, 0) is None and helper_shares(16, 1) is None
    assert set(HELPER_ORDER) == set(LEARNED)


def test_learning_writes_the_helper_modes_of_the_sides_it_trained_and_keeps_the_others(tmp_path) -> None:
    recs = (
        records("sat", [1.0, None, 2.0])
        + records("sat-rows", [0.5, 3.0, 9.0])
        + records("propagation", [None] * 3)
    )
    recs = [{**r, "set": "q64"} for r in recs]
    learned = learn(recs)
    assert learned.starts == {64: {"sat-rows": 2.0}}  # the owner races sat, sat-rows late ...
    assert learned.helpers == {64: ("sat-rows",)}  # ... and helpers race every mode but the owner's first
    target = tmp_path / "shares.py"
    target.write_text(Path(shares_module.__file__).read_text())
    write_shares(learned._replace(starts={64: {"sat": 1.5}}), target)
    written: dict[str, Any] = {}
    exec(compile(target.read_text(), str(target), "exec"), written)  # noqa: S102 - the file just written
    assert written["HELPER_ORDER"] == {**HELPER_ORDER, 64: ("sat-rows",)}
    assert written["LEARNED"] == {**LEARNED, 64: learned.shares[64]}
    assert written["LATE_START"] == {**LATE_START, 64: {"sat": 1.5}}
    write_shares(learned._replace(starts={64: {}}), target)  # retrained without one: the side's entry goes
    exec(compile(target.read_text(), str(target), "exec"), written)  # noqa: S102
    assert written["LATE_START"] == {s: row for s, row in LATE_START.items() if s != 64}


def test_helpers_race_first_the_mode_that_answers_where_the_owner_is_stuck_not_the_fastest_alone() -> None:
    owner = [1.0, 1.0, 1.0, 1.0, None]
    same = [0.5, 0.5, 0.5, 0.5, None]  # faster alone, on the grids the owner answers anyway: PAR-2 22
    apart = [9.0, 9.0, 9.0, 9.0, 3.0]  # slower alone, answers the grid the owner cannot: PAR-2 39
    recs = records("sat-plain", owner) + records("sat-rows", same) + records("sat-plain-false", apart)
    shares = {"sat-plain": 1 - 3 * STOCHASTIC_SHARE, **dict.fromkeys(STOCHASTIC, STOCHASTIC_SHARE)}
    assert helper_order(recs, shares, {}) == ("sat-plain-false", "sat-rows")
    # the owner's own late member answers grid 4 (at 4.8 s) before a helper joining at 2 s could (5 s)
    late = {"sat-plain": 0.3, "sat-plain-false": 0.694, **dict.fromkeys(STOCHASTIC, STOCHASTIC_SHARE)}
    assert helper_order(recs, late, {"sat-plain-false": 0.5}) == ("sat-rows", "sat-plain-false")


def test_a_helper_kept_first_is_raced_first_and_the_greedy_complements_the_owner_and_it() -> None:
    owner = [1.0, 1.0, 1.0, None, None]
    kept = [9.0, 9.0, 9.0, 2.0, None]  # answers grid 3 only
    other = [9.0, 9.0, 9.0, 2.0, 9.0]  # answers grid 3 too, and grid 4: chosen first when nothing is kept
    late = [9.0, 9.0, 9.0, None, 3.0]  # grid 4 only, sooner than `other`: after `kept`, the better complement
    recs = (
        records("sat-plain", owner)
        + records("sat", kept)
        + records("sat-rows", other)
        + records("sat-rows-false", late)
    )
    shares = {"sat-plain": 1 - 3 * STOCHASTIC_SHARE, **dict.fromkeys(STOCHASTIC, STOCHASTIC_SHARE)}
    assert helper_order(recs, shares, {})[0] == "sat-rows"
    assert helper_order(recs, shares, {}, ("sat",)) == ("sat", "sat-rows-false", "sat-rows")


def records(config: str, cpus: list[float | None], limit: float = 10.0) -> list[dict[str, Any]]:
    """Training records of one member alone, limit 10 s (None: not solved)."""
    return [
        {
            "config": config,
            "index": i,
            "limit": limit,
            "cpu": c or limit,
            "status": "solved" if c else "timeout",
        }
        for i, c in enumerate(cpus)
    ]


def test_learning_gives_the_time_to_the_member_that_solves_and_none_to_one_that_never_does() -> None:
    fast = [0.5, 1.0, 2.0, 0.3, 6.0]
    shares, starts = learn_set(
        records("sat", fast) + records("propagation", [None] * 5) + records("annealing", [None] * 5)
    )
    assert starts == {}
    assert shares == {
        "sat": pytest.approx(1 - 3 * STOCHASTIC_SHARE),
        **dict.fromkeys(STOCHASTIC, STOCHASTIC_SHARE),
    }
    assert predict({"sat": fast}, {"sat": 0.5}, 10.0) == [1.0, 2.0, 4.0, 0.6, 20.0]


def test_learning_gives_a_member_that_alone_solves_one_puzzle_a_share_the_median_bound_allows() -> None:
    sat = records("sat", [0.5, 1.0, 2.0, 0.3, None])
    rare = records("propagation", [None, None, None, None, 0.2])
    shares, _ = learn_set(sat + rare)
    assert 0 < shares["propagation"] < shares["sat"]
    times = {"sat": [0.5, 1.0, 2.0, 0.3, None], "propagation": [None, None, None, None, 0.2]}
    race_times = predict(times, shares, 10.0)
    assert race_times[4] < 10.0  # the rare one is solved ...
    assert sorted(race_times)[2] <= 1.05 * 1.0  # ... and the median stays within 5% of sat's alone (1.0 s)


def test_a_bench_run_stops_at_its_cpu_limit_though_its_wall_deadline_is_far() -> None:
    from bench.portfolio import run_config, timed

    spec = PortfolioSpec(name="propagation", members=(MemberSpec(solver="propagation"),))
    r, _, cpu = timed(lambda: run_config(spec, parse_puzzle(FRISCH), 60.0, cpu_limit=0.3))
    assert r.status != "solved" and 0.3 <= cpu < 1.3  # stopped within a second of CPU past its limit


def test_a_failed_run_settles_its_puzzle_only_after_its_whole_cpu_limit() -> None:
    from bench.learn_shares import conclusive

    def run(status: str, cpu: float) -> dict[str, Any]:
        return {"status": status, "cpu": cpu, "limit": 20.0}

    assert conclusive(run("solved", 3.0)) and conclusive(run("timeout", 20.01))
    assert not conclusive(run("timeout", 7.0))  # cut short by the wall deadline on a loaded machine
    assert not conclusive(run("approximate", 12.0))
    assert conclusive(run("solved", 21.0))  # solved past its limit: settled, as not solved within it


def test_a_helper_of_the_race_solves_a_25x25_grid_with_the_mode_it_was_moved_to() -> None:
    puzzle = parse_puzzle(FRISCH)
    r = race(puzzle, "race", time_limit=30, seed=11, variant=1)
    late = [m for m in LATE_START.get(25, {}) if m in LEARNED[25]]
    own = max(LEARNED[25], key=lambda m: (m not in late, LEARNED[25][m]))
    moved_to = next(m for m in HELPER_ORDER[25] if m != own)
    assert r.status == "solved" and r.solver == moved_to and own not in r.counters


def test_a_member_that_pays_only_on_hard_grids_joins_late_and_keeps_the_easy_ones_fast() -> None:
    main = [0.5, 0.6, 0.7, 0.8, 0.9, 30.0, None]  # the main member: quick on most, stuck on two
    tail = [2.0, 2.0, 2.0, 2.0, 2.0, 3.0, 4.0]  # another: slower on the easy ones, settles the two
    recs = records("sat-plain", main, limit=60.0) + records("sat-plain-fewest", tail, limit=60.0)
    shares, starts = learn_set(recs)
    assert set(starts) == {"sat-plain-fewest"} and starts["sat-plain-fewest"] >= 0.9  # after the easy ones
    race = predict({"sat-plain": main, "sat-plain-fewest": tail}, shares, 60.0, starts)
    assert race[:5] == pytest.approx([t / (1 - 3 * STOCHASTIC_SHARE) for t in main[:5]], rel=0.01)
    assert max(race) < 20.0  # both stuck ones within the limit


def test_a_late_member_first_runs_once_the_others_have_done_its_start_in_work(monkeypatch) -> None:
    from solvers.race.members import SLICE_S

    monkeypatch.setitem(
        LEARNED, 25, {"sat-plain": 0.7, "sat-rows": 0.294, **dict.fromkeys(STOCHASTIC, STOCHASTIC_SHARE)}
    )
    monkeypatch.setitem(LATE_START, 25, {"sat-rows": 0.15})
    monkeypatch.setitem(HELPER_ORDER, 25, ("sat-rows", "sat-plain-fewest", "sat", "sat-plain"))
    members = {m.name: m for m in _build(PRESETS["race"], parse_puzzle(FRISCH), seed=0)}
    assert members["sat-rows"].vtime > 0.15 / SLICE_S * 0.294 / 0.706  # held back by the others' 0.15 s
    trace: list[tuple[str, Any, int]] = []
    race(parse_puzzle(FRISCH), "race", time_limit=30, seed=0, trace=trace)
    names = [name for name, *_ in trace]
    assert "sat-rows" in names  # this grid takes the race longer than the late start
    before = names[: names.index("sat-rows")]
    assert before.count("sat-plain") * 4 >= 0.9 * 0.15 / SLICE_S  # 4 slices a step
    helpers = [{m.name: m for m in _build(PRESETS["race"], parse_puzzle(FRISCH), 0, k)} for k in (1, 2)]
    # helper 1 races the first helper mode (here the owner's late member) at once, with every SAT share
    assert "sat-plain" not in helpers[0] and helpers[0]["sat-rows"].weight == pytest.approx(0.994)
    held = 0.15 / SLICE_S * 0.294 / 0.706
    assert helpers[0]["sat-rows"].vtime == pytest.approx(members["sat-rows"].vtime - held)  # not held back
    pick = "sat-plain-fewest"  # helper 2: the next mode
    assert {n for n in helpers[1] if n.startswith("sat")} == {pick} and helpers[1][pick].weight == 0.994
