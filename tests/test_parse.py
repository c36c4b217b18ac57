"""Reading puzzles in every notation and size, and rejecting bad input with line and reason."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest

from solvers.model.entries import Entry, read_entries
from solvers.model.parse import parse_compact_batch, parse_puzzle
from solvers.model.puzzle import ALPHABET, Box, NotationKind, PuzzleError
from tests.grids import blank, pattern_grid

EXAMPLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
# The seed article's demo puzzle (its Figure 1), as one line and one row per line.
SEED_LINE = "..62...8...897......481.5......6...2.7.....3.6...5......2.471....3.284...5...12.."
SEED_ROWS = [",".join("0" if ch == "." else ch for ch in SEED_LINE[i : i + 9]) for i in range(0, 81, 9)]


def read_all(text: str) -> list[Entry]:
    """Every entry of a whole input held in a string."""
    return list(read_entries(io.StringIO(text)))


def compact(grid: np.ndarray, empty: str = ".") -> str:
    return "".join(empty if v == 0 else ALPHABET[v - 1] for v in grid)


def test_a_compact_line_is_read_with_its_square_box_inferred():
    p = parse_puzzle(EXAMPLE)
    assert p.box == Box(3, 3)
    assert p.givens[0] == 5 and p.givens[2] == 0
    assert p.render() == EXAMPLE


@pytest.mark.parametrize("empty", [".", "0", "_", "-"])
def test_every_empty_symbol_means_an_empty_cell(empty):
    p = parse_puzzle(EXAMPLE.replace(".", empty))
    assert (p.givens == parse_puzzle(EXAMPLE).givens).all()
    assert p.render() == EXAMPLE.replace(".", empty)


@pytest.mark.parametrize(
    "shape", [(2, 2), (2, 3), (3, 2), (2, 4), (3, 3), (3, 4), (4, 4), (5, 5), (6, 6), (7, 7), (8, 8)]
)
def test_every_box_shape_reads_from_integers_and_compact_where_the_alphabet_allows(shape):
    box = Box(*shape)
    grid = blank(pattern_grid(box), 0.5, seed=box.n)
    as_ints = ",".join(str(v) for v in grid)
    p = parse_puzzle(as_ints, box)
    assert p.box == box and (p.givens == grid).all()
    assert p.notation.kind is NotationKind.INTEGERS and p.render() == as_ints
    if box.n <= len(ALPHABET):
        q = parse_puzzle(compact(grid), box)
        assert (q.givens == grid).all()


def test_sixteen_by_sixteen_letters_follow_the_corpus_alphabet():
    grid = blank(pattern_grid(Box(4, 4)), 0.3, seed=1)
    p = parse_puzzle(compact(grid))
    assert p.box == Box(4, 4)
    assert (p.givens == grid).all()
    assert "G" in compact(pattern_grid(Box(4, 4)))


def test_whitespace_separated_integers_are_read():
    text = " ".join(str(v) for v in parse_puzzle(EXAMPLE).givens)
    p = parse_puzzle(text)
    assert (p.givens == parse_puzzle(EXAMPLE).givens).all()


def test_a_grid_written_one_row_per_line_is_one_puzzle_starting_at_its_first_line():
    entries = read_all("# the seed article's puzzle\n" + "\n".join(SEED_ROWS) + "\n\n" + EXAMPLE + "\n")
    assert [e.line for e in entries] == [2, 12]
    assert entries[0].error is None
    assert (entries[0].puzzle.givens == parse_puzzle(SEED_LINE).givens).all()
    assert entries[0].puzzle.render().startswith("0,0,6,2")


def test_gzip_files_are_read(tmp_path):
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(EXAMPLE + "\n" + SEED_LINE + "\n")
    entries = list(read_entries(path))
    assert [e.line for e in entries] == [1, 2]
    assert all(e.puzzle is not None for e in entries)


@pytest.mark.parametrize(
    ("side", "shape"),
    [(6, (2, 3)), (8, (2, 4)), (10, (2, 5)), (12, (3, 4)), (15, (3, 5)), (20, (4, 5)), (30, (5, 6)),
     (18, (3, 6)), (24, (4, 6)), (9, (3, 3)), (16, (4, 4))],
)  # fmt: skip
def test_every_side_with_a_conventional_box_has_it_inferred_in_both_notations(side, shape):
    box = Box(*shape)
    grid = blank(pattern_grid(box), 0.4, seed=side)
    assert Box.for_side(side) == box
    assert parse_puzzle(compact(grid)).box == box
    assert parse_puzzle(",".join(map(str, grid))).box == box


def test_a_given_box_overrides_the_inferred_one():
    grid = compact(pattern_grid(Box(3, 2)))  # a full grid whose boxes are 3 rows by 2 columns
    with pytest.raises(PuzzleError, match="box 1 has two"):
        parse_puzzle(grid)  # read as 2x3, the conventional box of 6
    assert parse_puzzle(grid, "3x2").box == Box(3, 2)


def test_a_prime_side_has_no_box_to_infer_and_the_error_says_to_give_one():
    with pytest.raises(PuzzleError, match=r"a 7x7 grid has no box of its own .*--box RxC"):
        parse_puzzle(",".join(["0"] * 49))


def test_a_file_of_6x6_puzzles_reads_as_one_puzzle_per_line_not_rows_of_a_36x36_grid():
    grids = [compact(blank(pattern_grid(Box(2, 3)), 0.5, seed=k)) for k in range(5)]
    entries = read_all("\n".join(grids) + "\n")
    assert [(e.line, e.error, e.puzzle.box) for e in entries] == [(k + 1, None, Box(2, 3)) for k in range(5)]


def test_a_line_too_wide_for_a_whole_6x6_grid_suggests_the_box_of_a_36x36_row():
    row = ",".join(str(v) for v in range(1, 37))
    hint = r"value 7 is larger than 6; .* one row of a 36x36 grid, give --box 6x6"
    with pytest.raises(PuzzleError, match=hint):
        parse_puzzle(row)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (EXAMPLE[:-1], "80 cells do not make a square grid"),
        (EXAMPLE + "1", "82 cells"),
        (EXAMPLE[:-1] + "Z", "unknown symbol 'Z'"),
        (EXAMPLE[:-1] + "?", "unknown symbol '?'"),
        ("55" + EXAMPLE[2:], "row 1 has two 5s"),
        (EXAMPLE[:27] + "5" + EXAMPLE[28:], "column 1 has two 5s"),
        (EXAMPLE[:10] + "5" + EXAMPLE[11:], "has two 5s"),
        ("", "empty"),
        ("1,2,x" + ",0" * 78, "'x' is not an integer"),
        ("10" + ",0" * 80, "value 10 is larger than 9"),
    ],
)
def test_bad_input_is_rejected_with_the_reason(text, reason):
    with pytest.raises(PuzzleError, match=reason):
        parse_puzzle(text)


def test_a_box_clash_is_named_as_a_box():
    text = "5" + "." * 9 + "5" + "." * 70
    with pytest.raises(PuzzleError, match="box 1 has two 5s"):
        parse_puzzle(text)


def test_a_bad_line_names_its_line_and_the_rest_of_the_file_goes_on():
    lines = [EXAMPLE, "55" + EXAMPLE[2:], EXAMPLE[:40], SEED_LINE]
    entries = read_all("\n".join(lines))
    assert [e.line for e in entries] == [1, 2, 3, 4]
    assert entries[1].message == "line 2: row 1 has two 5s"
    assert entries[2].message.startswith("line 3: 40 cells")
    assert entries[0].puzzle is not None and entries[3].puzzle is not None


def test_undecodable_bytes_and_nul_bytes_are_invalid_lines_not_crashes(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(EXAMPLE.encode() + b"\n\xff\xfe\x00garbage\n" + EXAMPLE[:-1].encode() + b"\x00\n")
    entries = list(read_entries(path))
    assert [e.line for e in entries] == [1, 2, 3]
    assert entries[1].error == "the line is not UTF-8 text"
    assert entries[2].error is not None


def test_a_truncated_gzip_file_ends_with_an_error_entry(tmp_path):
    path = tmp_path / "cut.gz"
    data = gzip.compress(((EXAMPLE + "\n") * 200).encode())
    path.write_bytes(data[: len(data) // 2])
    entries = list(read_entries(path))
    assert entries[-1].error is not None and "cannot be read further" in entries[-1].error


def test_grids_larger_than_64_are_refused():
    with pytest.raises(PuzzleError, match="larger than"):
        parse_puzzle(",".join(["0"] * (81 * 81)))


def test_the_vectorised_parser_agrees_with_the_line_parser():
    lines = [EXAMPLE, SEED_LINE, "55" + EXAMPLE[2:], EXAMPLE[:-1] + "Z", EXAMPLE[:-1]]
    givens, ok = parse_compact_batch(lines, Box(3, 3))
    assert ok.tolist() == [True, True, False, False, False]
    assert (givens[0] == parse_puzzle(EXAMPLE).givens).all()
    assert (givens[1] == parse_puzzle(SEED_LINE).givens).all()


def test_stdin_style_streams_are_read():
    entries = list(read_entries(io.StringIO(EXAMPLE + "\n\n" + SEED_LINE + "\n")))
    assert [e.line for e in entries] == [1, 3]
