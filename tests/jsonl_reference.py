"""A plain-Python JSON Lines renderer of `ResultColumns`: the reference the compiled one is held to.

Same bytes as `pipeline.engine.render.jsonl.render`, written the obvious way (f-strings, the json
module's own escaping), so a test can compare the kernel against it on any columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring

import numpy as np

from pipeline.engine.render.jsonl import render as render_compiled
from solvers.model.columns import (
    COUNTER_DECIMALS,
    COUNTERS_RAW,
    COUNTERS_SIMPLE,
    TIME_DECIMALS,
    ResultColumns,
)
from solvers.model.frame import fixed, ms_fixed
from solvers.model.result import SolveResult
from solvers.model.status import STATUS_NAMES


def columns(texts: list[str], results: Sequence[SolveResult]) -> ResultColumns:
    """The result columns of `results`, aligned with the puzzle `texts`."""
    return ResultColumns.build(texts, results)


def render_py(input_name: str, indices: list[int], lines: list[int], cols: ResultColumns) -> bytes:
    """Render columns as JSON Lines in plain Python (the compiled renderer's bytes)."""
    inp = encode_basestring(input_name)
    names = [encode_basestring(n) for n in cols.names]
    puzzles, solutions, errors = cols.puzzle.to_list(), cols.solution.to_list(), cols.error.to_list()
    raw = cols.counters_raw.to_list()
    time_q = ms_fixed(cols.time_ns, TIME_DECIMALS).tolist()  # the record's time_ms digits, from its ns
    out = []
    for i in range(len(cols)):
        solver = int(cols.solver[i])
        kind = int(cols.counter_kind[i])
        if kind == COUNTERS_SIMPLE:
            counters = (
                f'{{{names[int(cols.counter_solver[i])]}:{{"nodes":{int(cols.counter_nodes[i])},'
                f'"guesses":{int(cols.counter_guesses[i])},'
                f'"time_ms":{fixed(int(cols.counter_time_ns[i]), COUNTER_DECIMALS)}}}}}'
            )
        else:
            counters = raw[i] if kind == COUNTERS_RAW else "{}"
        out.append(
            f'{{"line":{lines[i]},"input":{inp},"index":{indices[i]},"puzzle":{encode_basestring(puzzles[i])},'
            f'"status":"{STATUS_NAMES[int(cols.status[i])]}",'
            f'"solution":{encode_basestring(solutions[i]) if solutions[i] else "null"},'
            f'"cost":{int(cols.cost[i]) if cols.has_cost[i] else "null"},'
            f'"solver":{"null" if solver < 0 else names[solver]},'
            f'"time_ms":{fixed(time_q[i], TIME_DECIMALS) if cols.time_ok[i] else "null"},'
            f'"error":{encode_basestring(errors[i]) if errors[i] else "null"},'
            f'"nodes":{int(cols.nodes[i])},"guesses":{int(cols.guesses[i])},"restarts":{int(cols.restarts[i])},'
            f'"counters":{counters}}}'
        )
    return "\n".join(out).encode()


def render(input_name: str, indices: list[int], lines: list[int], cols: ResultColumns) -> bytes:
    """Render columns with the compiled kernel (loads numba)."""
    index, line = np.asarray(indices, np.int64), np.asarray(lines, np.int64)
    return render_compiled(cols, input_name, index, line)
