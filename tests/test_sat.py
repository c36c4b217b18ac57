"""The SAT member: its encoding, its verdicts on the conformance data, and its place in the race."""

from __future__ import annotations

import numpy as np
import pytest
from pysat.solvers import Solver

from solvers.exact.propagation import root_candidates
from solvers.model.parse import parse_puzzle
from solvers.model.verify import is_solution
from solvers.race.members import FOUND, NO_SOLUTION, PROGRESS
from solvers.race.portfolio import PRESETS, MemberSpec, PortfolioSpec, _build, race
from solvers.sat.encoding import _pairwise, _sequential, clause_count, decode, encode, estimate
from solvers.sat.member import CLAUSES_PER_SLICE, LOAD_PER_STEP, SAT_MODES, SLICES_PER_STEP, SatMember
from solvers.shares import learned_shares
from tests.test_conformance import CASES, Case
from tests.test_portfolio import DEMO, FRISCH, HARD
from tests.test_portfolio import NO_SOLUTION as UNSOLVABLE

STOP = np.zeros(1, dtype=np.int64)
FRISCH_1 = (  # frisch #1: the race solves it in about a second, the SAT member first
    ".N..JG..O7591...8I....L..FG.M.B8...P.E...CJ..H...............G.4.H.D.O.NJA2.....J.EN4.L6MA.B.2......"
    "HE..2..DC.....F4KMA.B.9O8M....62...47C19......E5...I2.8M.JGL...ADN..K..3.F7..H3.5..89....I.J.....NL."
    "1B..9.FAP.6.N....537.H..O......1..N...O...LC.68.PGKOA.FNBH.....7.C.....M..645.ECP.I..N.F.J1...MK.79."
    "I.L..8.O..9.P...A...2.1J...621.D.M.....B8LG..P..CH.HP.N7E.L1....3..B..O.G45....BIO....5.C.P...FN48E."
    "...FL.....2.DH..17..59O....I.MF..2G.N...A6O.HC.PB.72.1..L...IM.96E.45G.......9...7M..A.O...I...L...."
    ".C.JA.........1.....E.48.O.BI.......PHL.6..1....5CG6M...N4FI8...K..H.E......L..4.917....BE.G8F.M.I.."
    "8F......5.O3..4...9.....K"
)


@pytest.mark.parametrize("mode", sorted(SAT_MODES))
@pytest.mark.parametrize("case", CASES, ids=[c.origin for c in CASES])
def test_every_sat_mode_solves_or_refutes_every_conformance_puzzle(case: Case, mode: str) -> None:
    puzzle = parse_puzzle(case.puzzle, case.box)
    r = race(puzzle, mode, time_limit=10, seed=0)
    if case.count == 0:
        assert (r.status, r.solver, r.solution) == ("unsolvable", mode, None)
        return
    assert r.status == "solved" and r.solver == mode and r.cost == 0
    grid = parse_puzzle(r.solution, case.box).givens
    assert is_solution(puzzle, grid)
    if case.solution is not None:  # unique: the one written in the file
        assert r.solution == case.solution


def test_the_encoding_keeps_only_root_candidates_and_a_refuted_root_needs_no_solver() -> None:
    puzzle = parse_puzzle(CASES[0].puzzle)  # tdoku's first: singles alone solve it, all fixed at the root
    cnf = encode(puzzle)
    assert cnf is not None and cnf.clauses == 0 and cnf.variables == 0
    assert is_solution(puzzle, decode([], cnf))
    placeless = parse_puzzle(".23..1..4.......")  # the top left cell sees 1, 2, 3 and 4
    assert encode(placeless) is None
    member = SatMember(placeless)
    assert member.step(0, STOP) == NO_SOLUTION and member.counters()["status"] == "unsolvable"


def test_the_encoding_has_a_variable_per_open_cell_and_root_candidate_and_the_clauses_estimated() -> None:
    puzzle = parse_puzzle(FRISCH)
    cand = root_candidates(puzzle.box, puzzle.givens)
    assert cand is not None
    counts = np.bitwise_count(cand)
    for up_to in (2, 16):
        cnf = encode(puzzle, pairwise_up_to=up_to)
        assert cnf is not None
        assert len(cnf.cell) == int(counts[counts > 1].sum())  # open cells' candidates, no more
        assert np.all((cand[cnf.cell] >> (cnf.value.astype(np.uint64) - np.uint64(1))) & np.uint64(1) == 1)
        assert cnf.clauses == estimate(puzzle, cand, up_to)
        assert (cnf.variables > len(cnf.cell)) == (up_to == 2)  # counters' auxiliaries
        assert set(cnf.fixed[counts == 1].tolist()) <= set(range(1, 26)) and not cnf.fixed[counts > 1].any()


@pytest.mark.parametrize("up_to", [2, 3, 16])
def test_at_most_one_holds_for_every_pair_of_a_group_and_exactly_one_literal_can_be_true(up_to: int) -> None:
    groups = np.array([[1, 2, 3, 4, 5, 6, 7]], dtype=np.int32)
    sizes = np.array([7])
    pairs = _pairwise(groups, sizes, up_to)
    counter, top = _sequential(groups, sizes, up_to, 7)
    clauses = [[1, 2, 3, 4, 5, 6, 7], *np.concatenate([pairs, counter]).tolist()]
    with Solver(name="cadical195", bootstrap_with=clauses) as solver:
        for a in range(1, 8):
            assert solver.solve(assumptions=[a]) is True
            for b in range(a + 1, 8):
                assert solver.solve(assumptions=[a, b]) is False
        assert solver.solve(assumptions=[-a for a in range(1, 8)]) is False
    assert clause_count(sizes, up_to) == len(clauses)


def test_another_order_seed_numbers_the_literals_otherwise_and_decodes_to_a_solution() -> None:
    puzzle = parse_puzzle(HARD)
    plain, shuffled = encode(puzzle), encode(puzzle, order_seed=12345)
    assert plain is not None and shuffled is not None
    assert plain.clauses == shuffled.clauses and not np.array_equal(plain.cell, shuffled.cell)
    for cnf in (plain, shuffled):
        with Solver(name="cadical195") as solver:
            for block in cnf.blocks():
                solver.append_formula(block)
            assert solver.solve() is True
            assert is_solution(puzzle, decode(solver.get_model(), cnf))


def test_the_member_charges_its_encoding_up_front_loads_in_blocks_then_advances_in_steps_of_conflicts() -> (
    None
):
    member = SatMember(parse_puzzle(FRISCH))
    charged = member.vtime
    assert charged == pytest.approx(2 * member.clauses / CLAUSES_PER_SLICE)
    assert member.step(0, STOP) == PROGRESS and member.search is not None  # the encoding
    loads = len(list(member.search.cnf.blocks(LOAD_PER_STEP)))
    assert loads >= 2  # the at-least-one clauses, then the binary ones
    outcomes = [member.step(0, STOP) for _ in range(loads + 4)]
    assert outcomes == [PROGRESS] * (loads + 4)  # frisch #0 takes thousands of conflicts
    c = member.counters()
    assert 15_000 < c["clauses"] < 30_000 and c["clauses"] == member.clauses
    step = SLICES_PER_STEP * member.slice_conflicts
    assert 4 * step <= c["conflicts"] <= 4 * (step + 5)  # each step a budget more
    assert c["restarts"] == 3 and c["nodes"] > c["conflicts"] and c["time_ms"] > 0
    assert member.vtime == pytest.approx(charged + c["conflicts"] / member.slice_conflicts, rel=0.01)


def test_a_grid_the_exact_member_settles_at_once_never_pays_for_its_large_encoding() -> None:
    empty = parse_puzzle("." * 625)
    member = SatMember(empty)
    assert member.clauses > 100_000  # an empty 25x25 grid: every cell open with 25 candidates
    r = race(empty, "race", time_limit=5, seed=0)
    assert r.status == "solved" and r.solver == "propagation"
    sat = [name for name in r.counters if name in SAT_MODES]
    assert sat and all(r.counters[name]["time_ms"] < 20 for name in sat)  # root propagation only: no CNF
    alone = race(empty, "sat", time_limit=30, seed=0)  # nobody else: it encodes it all
    assert alone.status == "solved" and alone.counters["sat"]["clauses"] == member.clauses


def test_a_solved_step_hands_over_a_verified_grid() -> None:
    member = SatMember(parse_puzzle(HARD))
    while (outcome := member.step(0, STOP)) == PROGRESS:
        pass
    assert outcome == FOUND and is_solution(parse_puzzle(HARD), member.best_grid)
    assert member.best_cost == 0 and member.search is None  # freed once answered


def test_the_race_adds_the_sat_members_from_25x25_on_with_their_learned_shares() -> None:
    spec = PRESETS["race"]
    assert not set(SAT_MODES) & {m.name for m in _build(spec, parse_puzzle(DEMO), seed=1)}
    for text in (FRISCH, "." * 36**2):
        puzzle = parse_puzzle(text)
        learned = learned_shares(puzzle.box.n)
        assert learned is not None and sum(learned.get(m, 0) for m in SAT_MODES) > 0.9
        members = {m.name: m for m in _build(spec, puzzle, seed=1)}
        sat = {name: m for name, m in members.items() if name in SAT_MODES}
        assert sat and all(isinstance(m, SatMember) and m.weight == learned[name] for name, m in sat.items())


def test_a_race_of_the_sat_member_alone_has_no_deadline_of_its_own_and_proves_no_solution() -> None:
    r = race(parse_puzzle(UNSOLVABLE), "sat", seed=3)
    assert (r.status, r.solver) == ("unsolvable", "sat")


def test_a_portfolio_whose_members_all_sit_out_this_size_is_refused_with_the_reason() -> None:
    spec = PortfolioSpec(name="big only", members=(MemberSpec(solver="sat", min_side=25),))
    with pytest.raises(ValueError, match="no member of portfolio 'big only' races 9x9 grids"):
        race(parse_puzzle(DEMO), spec, time_limit=1)


def test_the_same_seed_replays_the_sat_members_win() -> None:
    runs = [race(parse_puzzle(FRISCH_1), "race", time_limit=30, seed=7) for _ in range(2)]
    assert runs[0].status == runs[1].status == "solved"
    assert (runs[0].solver, runs[0].solution) == (runs[1].solver, runs[1].solution)
    work = [
        {k: (c.get("nodes"), c.get("conflicts"), c["restarts"]) for k, c in r.counters.items()} for r in runs
    ]
    assert work[0] == work[1]


@pytest.mark.parametrize("mode", sorted(SAT_MODES))
def test_a_huge_cnf_runs_without_elimination_or_probing_and_a_smaller_one_keeps_its_options(mode) -> None:
    from solvers.sat.member import HEAVY_INPROCESSING, INPROCESSING_MAX_CLAUSES

    member = SatMember(parse_puzzle(FRISCH), mode=SAT_MODES[mode])
    assert member.options(INPROCESSING_MAX_CLAUSES) == SAT_MODES[mode].options
    huge = member.options(INPROCESSING_MAX_CLAUSES + 1)
    assert huge == {**SAT_MODES[mode].options, **HEAVY_INPROCESSING} and huge["elim"] == huge["probe"] == 0


def test_a_mode_deciding_false_first_searches_another_way_than_its_true_first_twin() -> None:
    puzzle = parse_puzzle(FRISCH)
    runs = {mode: race(puzzle, mode, time_limit=30, seed=0) for mode in ("sat-rows", "sat-rows-false")}
    for mode, r in runs.items():
        assert r.status == "solved" and r.solver == mode
        assert is_solution(puzzle, parse_puzzle(r.solution, puzzle.box).givens)
    conflicts = [r.counters[mode]["conflicts"] for mode, r in runs.items()]
    assert SAT_MODES["sat-rows-false"].options == {**SAT_MODES["sat-rows"].options, "phase": 0}
    assert conflicts[0] != conflicts[1]  # the option reached CaDiCaL: the same clauses, another search
