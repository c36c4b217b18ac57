"""Every solver by name, with its kind: the one list the portfolio, `solve` and the CLI read.

Why one registry: a name a user gives must mean the same wherever it is read, and an unknown one get
the same answer listing what exists. Solver modules register themselves when imported, so adding a
solver touches its own module only; this module is a leaf. Kinds: `exact` (a batch kernel,
`KernelSolver`: solves, counts, proves; the first exact member of a portfolio runs the fast path),
`complete` (a member factory raced one puzzle at a time, `solvers.sat.member`: solves and proves),
`stochastic` (a local search in slices, `StochasticSolver`: solutions or approximate grids, no proof).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Kind(StrEnum):
    """What a registered solver is (see the module docstring); listed in this order."""

    EXACT = "exact"
    COMPLETE = "complete"
    STOCHASTIC = "stochastic"


@dataclass(frozen=True)
class Registered:
    """One solver: its name, kind and the object that runs it (by kind, see `Kind`)."""

    name: str
    kind: Kind
    solver: Any
    summary: str = ""


SOLVERS: dict[str, Registered] = {}


def register(name: str, kind: Kind, solver: Any, summary: str = "") -> None:
    """Add a solver under `name`; a second solver of the same name is a programming error."""
    if name in SOLVERS and SOLVERS[name].solver is not solver:
        raise ValueError(f"two solvers named {name!r}")
    SOLVERS[name] = Registered(name, kind, solver, summary)


def names(kind: Kind | None = None) -> list[str]:
    """Return the registered names (of one kind), exact first, then complete, then stochastic,
    each kind in name order."""
    order = list(Kind)
    chosen = [r for r in SOLVERS.values() if kind is None or r.kind is kind]
    return [r.name for r in sorted(chosen, key=lambda r: (order.index(r.kind), r.name))]


def unknown_names(unknown: Iterable[str], where: str = "", presets: Iterable[str] = ()) -> ValueError:
    """Return the error for names that are no solver: it names them and lists every solver by kind
    (and the portfolio presets, when given)."""
    bad = list(unknown)
    listed = "; ".join(f"{kind}: {', '.join(names(kind))}" for kind in Kind if names(kind))
    more = f"; presets: {', '.join(presets)}" if presets else ""
    return ValueError(
        f"unknown solver{'s' if len(bad) > 1 else ''} {', '.join(repr(b) for b in bad)}{where}; "
        f"solvers: {listed}{more}"
    )


def find(name: str, presets: Iterable[str] = ()) -> Registered:
    """Return the solver registered as `name`; raise the `unknown_names` error otherwise."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise unknown_names([name], presets=presets) from None


class KindView(Mapping[str, T], Generic[T]):
    """The solvers of one kind as a read-only mapping name -> solver object (a live view)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind

    def __getitem__(self, name: str) -> T:
        entry = SOLVERS.get(name)
        if entry is None or entry.kind is not self.kind:
            raise KeyError(name)
        solver: T = entry.solver
        return solver

    def __iter__(self) -> Iterator[str]:
        return (r.name for r in SOLVERS.values() if r.kind is self.kind)

    def __len__(self) -> int:
        return sum(1 for r in SOLVERS.values() if r.kind is self.kind)


__all__ = ["SOLVERS", "Kind", "KindView", "Registered", "find", "names", "register", "unknown_names"]
