"""The compiled JSON Lines and CSV writers, generated from the field table by
`python -m pipeline.engine.render.put`: do not edit (`tests/test_fields.py` compares them).
"""

import numpy as np
from numba import njit

from pipeline.engine.render.put import (
    BLANK,
    LINE_END,
    NULL,
    ROW_END,
    U0,
    comma,
    put_counters,
    put_csv,
    put_id,
    put_int,
    put_key,
    put_lit,
    put_number,
    put_text,
)


@njit(cache=True)
def write_jsonl(  # type: ignore[no-untyped-def]
    line, inp, index, puzzle_buf, puzzle_off, status, status_buf, status_off, solution_buf, solution_off,
    cost, has_cost, solver, solver_buf, solver_off, time_ms, time_ok, error_buf, error_off, nodes, guesses,
    restarts, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off, out, puzzle_plain, solution_plain,
    error_plain,
):  # fmt: skip
    """Every row as a JSON record, each ending in a newline; return the bytes written."""
    pos = U0
    for j in range(index.shape[0]):
        i = np.uint64(j)
        pos = put_int(out, put_key(out, pos, 0), line[i])
        pos = put_lit(out, put_key(out, pos, 1), inp)
        pos = put_int(out, put_key(out, pos, 2), index[i])
        pos = put_text(out, put_key(out, pos, 3), puzzle_buf, puzzle_off, i, puzzle_plain, False)
        pos = put_id(out, put_key(out, pos, 4), status[i], status_buf, status_off, NULL)
        pos = put_text(out, put_key(out, pos, 5), solution_buf, solution_off, i, solution_plain, True)
        pos = put_number(out, put_key(out, pos, 6), cost[i], has_cost[i], 0, NULL)
        pos = put_id(out, put_key(out, pos, 7), solver[i], solver_buf, solver_off, NULL)
        pos = put_number(out, put_key(out, pos, 8), time_ms[i], time_ok[i], 4, NULL)
        pos = put_text(out, put_key(out, pos, 9), error_buf, error_off, i, error_plain, True)
        pos = put_int(out, put_key(out, pos, 10), nodes[i])
        pos = put_int(out, put_key(out, pos, 11), guesses[i])
        pos = put_int(out, put_key(out, pos, 12), restarts[i])
        pos = put_key(out, pos, 13)
        pos = put_counters(
            out, pos, i, solver_buf, solver_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off
        )
        pos = put_lit(out, pos, ROW_END)
    return pos


@njit(cache=True)
def write_csv(  # type: ignore[no-untyped-def]
    line, inp, index, puzzle_buf, puzzle_off, status, status_buf, status_off, solution_buf, solution_off,
    cost, has_cost, solver, solver_buf, solver_off, time_ms, time_ok, error_buf, error_off, nodes, guesses,
    restarts, c_buf, c_off, out,
):  # fmt: skip
    """Every row as a CSV row (nulls empty), each ending in a newline; return the bytes written."""
    pos = U0
    for j in range(index.shape[0]):
        i = np.uint64(j)
        pos = put_int(out, pos, line[i])
        pos = put_lit(out, comma(out, pos), inp)
        pos = put_int(out, comma(out, pos), index[i])
        pos = put_csv(out, comma(out, pos), puzzle_buf, puzzle_off, i)
        pos = put_id(out, comma(out, pos), status[i], status_buf, status_off, BLANK)
        pos = put_csv(out, comma(out, pos), solution_buf, solution_off, i)
        pos = put_number(out, comma(out, pos), cost[i], has_cost[i], 0, BLANK)
        pos = put_id(out, comma(out, pos), solver[i], solver_buf, solver_off, BLANK)
        pos = put_number(out, comma(out, pos), time_ms[i], time_ok[i], 4, BLANK)
        pos = put_csv(out, comma(out, pos), error_buf, error_off, i)
        pos = put_int(out, comma(out, pos), nodes[i])
        pos = put_int(out, comma(out, pos), guesses[i])
        pos = put_int(out, comma(out, pos), restarts[i])
        pos = put_csv(out, comma(out, pos), c_buf, c_off, i)
        pos = put_lit(out, pos, LINE_END)
    return pos
