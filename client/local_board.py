"""One puzzle across the local processes (embedded mode): the `Board` (`pipeline.escalation.board`) they
share.

Workers meet in Redis; local processes meet in a small manager process forked with the
pool (multiprocessing's SyncManager: one dict, one queue), which dies with the command
like them (PR_SET_PDEATHSIG). The dict holds each race's lease (a CLOCK_MONOTONIC
deadline, the same clock in every process of the machine), its stop mark, the helpers'
entries, and which processes are busy; the queue carries the helper tasks an owner calls,
which a thread of the command hands to the pool (a pool process cannot submit work).
A split race also keeps there its cubes, each cube's claim (attempt k of cube i is taken by
`setdefault` of its claim key, atomic in the manager: a lapsed hold is taken again as attempt
k+1), the refuted cubes and the shared clauses (batch j appended by `setdefault` of key j).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

from pydantic import ValidationError

from pipeline.escalation.task import (
    MAX_BATCH_CLAUSES,
    MAX_SHARED_BATCHES,
    HelperEntry,
    HelperTask,
    read_clauses,
)
from solvers.race.cubes import MAX_CUBE_CELLS, MAX_CUBES

LEASE_S = 3.0  # as the workers' (worker.board): a dead owner's helpers stop this long after


class LocalBoard:
    """The races of every embedded job of one BatchClient, in the manager's dict; picklable (proxies)."""

    def __init__(self, state: Any, calls: Any, processes: int) -> None:
        self.state = (
            state  # dict proxy: ("lease"|"stop", chunk, row, job) and ("entry", ..., helper), ("busy", pid)
        )
        self.calls = calls  # queue proxy: HelperTask JSON texts for the command's dispatcher thread
        self.processes = processes
        self.job = ""

    def for_job(self, job: str) -> LocalBoard:
        """The same board, keyed by `job`."""
        board = LocalBoard(self.state, self.calls, self.processes)
        board.job = job
        return board

    def open(self, chunk: int, row: int) -> None:
        self.state[("lease", self.job, chunk, row)] = time.monotonic() + LEASE_S

    def over(self, chunk: int, row: int) -> bool:
        if self.state.get(("stop", self.job, chunk, row)):
            return True
        return self.state.get(("lease", self.job, chunk, row), 0.0) < time.monotonic()

    def close(self, chunk: int, row: int) -> None:
        self.state[("stop", self.job, chunk, row)] = True
        self.state.pop(("lease", self.job, chunk, row), None)

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        if self.state.get(("stop", self.job, chunk, row)) and entry.state == "started":
            return  # over before it began: nothing to wait for
        self.state[("entry", self.job, chunk, row, helper)] = entry.model_dump_json()

    def entries(self, chunk: int, row: int) -> dict[int, HelperEntry]:
        out = {}
        for key in self.state.keys():  # noqa: SIM118 - a proxy: one round trip for the key list
            if key[:4] == ("entry", self.job, chunk, row):
                with contextlib.suppress(KeyError, ValidationError):
                    out[int(key[4])] = HelperEntry.model_validate_json(self.state[key])
        return out

    def drop(self, chunk: int, row: int) -> None:
        for key in self.state.keys():  # noqa: SIM118
            if key[1:4] == (self.job, chunk, row) and key[0] != "stop":
                self.state.pop(key, None)

    def idle(self) -> int:
        busy = sum(1 for key in self.state.keys() if key[0] == "busy")  # noqa: SIM118
        return max(0, self.processes - busy)

    def call(self, task: HelperTask) -> None:
        self.calls.put(task.model_dump_json())

    def publish_cubes(self, chunk: int, row: int, cubes: list[Any], units: list[Any]) -> list[Any] | None:
        text = json.dumps([list(c) for c in cubes])
        if self.state.setdefault(("cubes", self.job, chunk, row), text) == text and units:
            self._push(chunk, row, units)
        return self.cubes(chunk, row)

    def cubes(self, chunk: int, row: int) -> list[Any] | None:
        raw = self.state.get(("cubes", self.job, chunk, row))
        return None if raw is None else read_clauses(raw, MAX_CUBES, MAX_CUBE_CELLS)

    def take_cube(self, chunk: int, row: int, helper: int, count: int) -> int | None:
        refuted = self.refuted(chunk, row)
        now = time.monotonic()
        for index in range(min(count, MAX_CUBES)):
            if index in refuted:
                continue
            held = self.state.get(("hold", self.job, chunk, row, index))
            if held is not None and held[1] >= now:
                continue
            attempt = 0 if held is None else held[2] + 1
            if self.state.setdefault(("claim", self.job, chunk, row, index, attempt), helper) == helper:
                self.state[("hold", self.job, chunk, row, index)] = (helper, now + LEASE_S, attempt)
                return index
        return None

    def hold_cube(self, chunk: int, row: int, helper: int, index: int) -> None:
        key = ("hold", self.job, chunk, row, index)
        held = self.state.get(key)
        if held is not None and held[0] == helper:
            self.state[key] = (helper, time.monotonic() + LEASE_S, held[2])

    def refute_cube(self, chunk: int, row: int, index: int, clause: Any) -> None:
        self.state[("refuted", self.job, chunk, row, index)] = True
        self._push(chunk, row, [clause])

    def refuted(self, chunk: int, row: int) -> set[int]:
        head = ("refuted", self.job, chunk, row)
        return {int(key[4]) for key in self.state.keys() if key[:4] == head}  # noqa: SIM118

    def shared(self, chunk: int, row: int, since: int) -> tuple[list[Any], int]:
        out = []
        at = since
        while (raw := self.state.get(("clauses", self.job, chunk, row, at))) is not None:
            out += read_clauses(raw, MAX_BATCH_CLAUSES) or []  # a malformed batch is no clause
            at += 1
        return out, at

    def _push(self, chunk: int, row: int, clauses: list[Any]) -> None:
        """Append batches of shared clauses: each at the first free position (at most MAX_SHARED_BATCHES)."""
        at = 0
        for start in range(0, len(clauses), MAX_BATCH_CLAUSES):
            text = json.dumps([list(c) for c in clauses[start : start + MAX_BATCH_CLAUSES]])
            while at < MAX_SHARED_BATCHES:
                if self.state.setdefault(("clauses", self.job, chunk, row, at), text) == text:
                    break
                at += 1

    @contextlib.contextmanager
    def busy(self) -> Any:
        """Mark this process busy (not idle for helpers) while the block runs."""
        key = ("busy", os.getpid())
        self.state[key] = True
        try:
            yield
        finally:
            self.state.pop(key, None)
