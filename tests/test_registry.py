"""The solver registry: every solver has a kind, is reachable by name, and unknown names get one answer."""

from __future__ import annotations

import pytest

from solvers import registry, solve
from solvers.exact import EXACT_SOLVERS
from solvers.kernel.outcome import OUTCOME_NAMES, Outcome
from solvers.registry import Kind
from solvers.stochastic import STOCHASTIC_SOLVERS

EXAMPLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"


def test_every_kind_has_solvers_and_every_solver_has_a_kind():
    assert registry.SOLVERS, "importing solvers registers them"
    assert {entry.kind for entry in registry.SOLVERS.values()} == set(Kind)
    assert all(isinstance(entry.kind, Kind) for entry in registry.SOLVERS.values())
    assert set(EXACT_SOLVERS) == set(registry.names(Kind.EXACT))
    assert set(STOCHASTIC_SOLVERS) == set(registry.names(Kind.STOCHASTIC))


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_solver_solves_a_puzzle_when_named_as_the_portfolio(name: str):
    r = solve(EXAMPLE, portfolio=name, time_limit=20, seed=1)
    assert r.status == "solved" and r.solver == name


@pytest.mark.parametrize("name", registry.names(Kind.EXACT))
def test_every_exact_solver_solves_a_puzzle_when_named_as_the_solver(name: str):
    r = solve(EXAMPLE, solver=name, time_limit=20)
    assert r.status == "solved" and r.solver == name


@pytest.mark.parametrize("arg", ["solver", "portfolio"])
def test_an_unknown_name_is_refused_with_every_solver_and_preset_listed(arg: str):
    with pytest.raises(ValueError, match="unknown solver 'telepathy'") as err:
        solve(EXAMPLE, **{arg: "telepathy"})
    message = str(err.value)
    assert all(name in message for name in registry.names())
    assert all(f"{kind}:" in message for kind in Kind)
    assert "presets: fast, race" in message


def test_a_solver_that_is_not_exact_named_as_the_solver_is_refused_with_its_kind():
    with pytest.raises(ValueError, match="'annealing' is stochastic.*portfolio='annealing'"):
        solve(EXAMPLE, solver="annealing")


def test_a_second_solver_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="two solvers named 'propagation'"):
        registry.register("propagation", Kind.EXACT, object())
    assert EXACT_SOLVERS["propagation"].name == "propagation"


def test_a_kind_view_holds_only_its_own_kind():
    with pytest.raises(KeyError):
        EXACT_SOLVERS["annealing"]
    assert len(EXACT_SOLVERS) == len(registry.names(Kind.EXACT))


def test_kernel_outcome_ints_are_the_enum_members_values():
    import solvers.kernel.outcome as outcome

    for member in Outcome:
        assert getattr(outcome, member.name) == int(member) and type(getattr(outcome, member.name)) is int
    exact = [outcome.DONE, outcome.LIMIT, outcome.TIMEOUT, outcome.BUDGET, outcome.STOPPED]
    assert [OUTCOME_NAMES[c] for c in exact] == ["done", "limit", "timeout", "budget", "stopped"]
    assert len(set(OUTCOME_NAMES.values())) == len(Outcome)


def test_a_portfolio_member_naming_no_solver_is_refused_when_made():
    from solvers.race.portfolio import MemberSpec

    with pytest.raises(ValueError, match="unknown solver 'nope'; solvers: exact: "):
        MemberSpec(solver="nope")
