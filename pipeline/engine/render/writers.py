"""The compiled JSON Lines and CSV writers, generated from the field table by
`python -m pipeline.engine.render.put`: do not edit (`tests/test_fields.py` compares them).
"""

import numpy as np
from numba import njit

from pipeline.engine.render.put import (
    BLANK,
    NULL,
    U0,
    comma,
    end_row,
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
        pos = put_int(out, put_key(out, pos, 0, 8), line[i])
        pos = put_lit(out, pos, inp)
        pos = put_int(out, put_key(out, pos, 17, 26), index[i])
        pos = put_text(out, put_key(out, pos, 26, 36), puzzle_buf, puzzle_off, i, puzzle_plain, False)
        pos = put_id(out, put_key(out, pos, 36, 46), status[i], status_buf, status_off, NULL)
        pos = put_text(out, put_key(out, pos, 46, 58), solution_buf, solution_off, i, solution_plain, True)
        pos = put_number(out, put_key(out, pos, 58, 66), cost[i], has_cost[i], 0, NULL)
        pos = put_id(out, put_key(out, pos, 66, 76), solver[i], solver_buf, solver_off, NULL)
        pos = put_number(out, put_key(out, pos, 76, 87), time_ms[i], time_ok[i], 4, NULL)
        pos = put_text(out, put_key(out, pos, 87, 96), error_buf, error_off, i, error_plain, True)
        pos = put_int(out, put_key(out, pos, 96, 105), nodes[i])
        pos = put_int(out, put_key(out, pos, 105, 116), guesses[i])
        pos = put_int(out, put_key(out, pos, 116, 128), restarts[i])
        pos = put_key(out, pos, 128, 140)
        pos = put_counters(
            out, pos, i, solver_buf, solver_off, c_kind, c_name, c_nodes, c_guesses, c_time_ns, c_buf, c_off
        )
        pos = end_row(out, pos, False)
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
        pos = end_row(out, pos, True)
    return pos
