"""One puzzle across the local processes (embedded mode): their `Board`, in a manager process forked with the
pool (one dict, one queue: docs/pipeline.md). The dict holds each escalation's lease (a CLOCK_MONOTONIC
deadline: one clock for the machine), stop mark, entries, cubes, claims and clauses (taken by `setdefault`,
atomic in the manager) and busy processes; the queue, the helper tasks a thread of the command hands to the
pool."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from pydantic import ValidationError

from pipeline.escalation.board import Board
from pipeline.escalation.task import MAX_SHARED_BATCHES, HelperEntry, HelperTask

LEASE_S = 3.0  # as the workers' (worker.board): a dead owner's helpers stop this long after


class LocalBoard(Board):
    """The escalations of every embedded job of one BatchClient, in the manager's dict; picklable."""

    def __init__(self, state: Any, calls: Any, processes: int, job: str = "") -> None:
        self.state = state  # dict proxy: ("lease"|"stop", job, chunk, row), ("entry", ...), ("busy", pid)
        self.calls = calls  # queue proxy: HelperTask JSON texts for the command's dispatcher thread
        self.processes = processes
        self.job = job

    def for_job(self, job: str) -> LocalBoard:
        """The same board, keyed by `job`."""
        return LocalBoard(self.state, self.calls, self.processes, job)

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

    def _create(self, chunk: int, row: int, cubes: str) -> bool:
        return bool(self.state.setdefault(("cubes", self.job, chunk, row), cubes) == cubes)

    def _stored(self, chunk: int, row: int) -> str | None:
        return self.state.get(("cubes", self.job, chunk, row))

    def _claim(self, chunk: int, row: int, helper: int, index: int, renew: bool) -> bool:
        key, now = ("hold", self.job, chunk, row, index), time.monotonic()
        held = self.state.get(key)
        if renew:
            if held is not None and held[0] == helper:
                self.state[key] = (helper, now + LEASE_S, held[2])
            return True
        if held is not None and held[1] >= now:
            return False
        attempt = 0 if held is None else held[2] + 1
        if self.state.setdefault(("claim", self.job, chunk, row, index, attempt), helper) != helper:
            return False
        self.state[key] = (helper, now + LEASE_S, attempt)
        return True

    def _mark(self, chunk: int, row: int, index: int, clause: str) -> bool:
        self.state[("refuted", self.job, chunk, row, index)] = clause
        return True

    def _marked(self, chunk: int, row: int) -> list[str]:
        head = ("refuted", self.job, chunk, row)
        return [str(key[4]) for key in self.state.keys() if key[:4] == head]  # noqa: SIM118 - a proxy

    def _append(self, chunk: int, row: int, batch: str) -> bool:
        return any(
            self.state.setdefault(("clauses", self.job, chunk, row, at), batch) == batch
            for at in range(MAX_SHARED_BATCHES)
        )

    def _batches(self, chunk: int, row: int, since: int) -> list[str]:
        out = []
        while (raw := self.state.get(("clauses", self.job, chunk, row, since + len(out)))) is not None:
            out.append(raw)
        return out

    @contextlib.contextmanager
    def busy(self) -> Any:
        """Mark this process busy (not idle for helpers) while the block runs."""
        key = ("busy", os.getpid())
        self.state[key] = True
        try:
            yield
        finally:
            self.state.pop(key, None)
