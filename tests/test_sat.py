"""The SAT member: its encoding, its verdicts on the conformance data, and its place in the race."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.parse import parse_puzzle
from solvers.portfolio import PRESETS, MemberSpec, PortfolioSpec, _build, race
from solvers.restarts import FOUND, IDLE, NO_SOLUTION, PROGRESS
from solvers.sat import CLAUSES_PER_SLICE, MAX_CLAUSES, STEP_CONFLICTS, SatMember, TooLarge, decode, encode
from solvers.verify import is_solution
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


@pytest.mark.parametrize("case", CASES, ids=[c.origin for c in CASES])
def test_the_sat_member_solves_or_refutes_every_conformance_puzzle(case: Case) -> None:
    puzzle = parse_puzzle(case.puzzle, case.box)
    r = race(puzzle, "sat", time_limit=10, seed=0)
    if case.count == 0:
        assert (r.status, r.solver, r.solution) == ("unsolvable", "sat", None)
        return
    assert r.status == "solved" and r.solver == "sat" and r.cost == 0
    grid = parse_puzzle(r.solution, case.box).givens
    assert is_solution(puzzle, grid)
    if case.solution is not None:  # unique: the one written in the file
        assert r.solution == case.solution


def test_the_encoding_leaves_out_values_of_given_peers_and_a_placeless_cell_is_refuted_at_once() -> None:
    cnf = encode(parse_puzzle("1.3434.22.4.4.2."))
    assert cnf is not None
    assert cnf.cells[0] == [1] and [1] in cnf.clauses  # the given 1: its one literal, alone
    assert cnf.cells[1] == [4 + 2]  # row 1 3 4 and column 4 leave the second cell only 2
    placeless = parse_puzzle(".23..1..4.......")  # the top left cell sees 1, 2, 3 and 4
    assert encode(placeless) is None
    member = SatMember(placeless)
    assert member.step(0, STOP) == NO_SOLUTION and member.counters()["status"] == "unsolvable"


def test_a_model_decodes_to_the_grid_of_each_cells_true_literal_only() -> None:
    puzzle = parse_puzzle("1.3434.22.4.4.2.")
    cnf = encode(puzzle)
    assert cnf is not None
    solution = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    model = [c * 4 + v for c, v in enumerate(solution)] + [3]  # variable 3 (cell 0 = 3) is not encoded
    grid = decode(model, cnf, 4)
    assert list(grid) == solution and is_solution(puzzle, grid)


def test_the_member_encodes_then_loads_then_advances_in_steps_of_conflicts_keeping_what_it_learnt() -> None:
    member = SatMember(parse_puzzle(FRISCH))
    outcomes = [member.step(0, STOP) for _ in range(6)]
    assert outcomes == [PROGRESS] * 6  # frisch #0 takes tens of thousands of conflicts
    c = member.counters()
    assert 20_000 < c["clauses"] < MAX_CLAUSES
    assert 4 * STEP_CONFLICTS <= c["conflicts"] <= 4 * (STEP_CONFLICTS + 5)  # each step a budget more
    assert c["restarts"] == 3 and c["nodes"] > c["conflicts"] and c["time_ms"] > 0
    work = 2 * c["clauses"] / CLAUSES_PER_SLICE + c["conflicts"] / member.slice_conflicts
    assert member.vtime == pytest.approx(work, rel=0.01)


def test_a_grid_too_open_to_encode_cheaply_is_left_to_an_exact_member_when_one_races_beside() -> None:
    empty = parse_puzzle("." * 625)
    with pytest.raises(TooLarge, match="752500 clauses"):
        encode(empty, MAX_CLAUSES)
    member = SatMember(empty, max_clauses=MAX_CLAUSES)
    assert member.step(0, STOP) == IDLE and member.counters()["status"].startswith("left to the others")
    r = race(empty, "race", time_limit=5, seed=0)
    assert r.status == "solved" and r.solver == "propagation"
    alone = race(empty, "sat", time_limit=30, seed=0)  # nobody to leave it to: it encodes it all
    assert alone.status == "solved" and alone.counters["sat"]["clauses"] == 752500


def test_a_solved_step_hands_over_a_verified_grid() -> None:
    member = SatMember(parse_puzzle(HARD))
    while (outcome := member.step(0, STOP)) == PROGRESS:
        pass
    assert outcome == FOUND and is_solution(parse_puzzle(HARD), member.best_grid)
    assert member.best_cost == 0 and member.solver is None  # freed once answered


def test_the_race_adds_the_sat_member_at_25x25_only_with_three_times_the_exact_members_weight() -> None:
    spec = PRESETS["race"]
    assert "sat" not in [m.name for m in _build(spec, parse_puzzle(DEMO), seed=1)]
    members = {m.name: m for m in _build(spec, parse_puzzle(FRISCH), seed=1)}
    assert isinstance(members["sat"], SatMember)
    assert members["sat"].weight == 3 * members["propagation"].weight == 171.0


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
