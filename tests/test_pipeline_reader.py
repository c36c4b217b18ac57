"""The producer's fast reader gives exactly `read_entries`' entries, and its clash check is exact."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.engine.checks import compact_ok
from pipeline.engine.reader import read_blocks
from solvers.model.entries import read_entries
from solvers.model.parse import CR_INSIDE, clash_mask, parse_compact_batch, too_long
from solvers.model.puzzle import ALPHABET, Box
from tests.conftest import SAMPLE, corpus_file
from tests.grids import blank, pattern_grid

SAMPLE_LINES = SAMPLE.read_text().splitlines()
ODD_LINES = [
    "",
    "# a comment",
    "1" * 81,  # clashes
    "5,3,0,0,7,0,0,0,0",  # one row of a 9x9 grid in integers ...
    "..62...8.",  # ... then a compact row: the grid ends unfinished
    "abc",
    "." * 16,
    "1 2 3 4 5 6 7 8 9",
    "." * 256,
    "\x1f" + "." * 80,
    "é" * 81,
    "  " + SAMPLE_LINES[0] + "  ",
    SAMPLE_LINES[1].replace(".", "0"),
    "1.3..." + "." * 30,  # a whole 6x6 grid (box 2x3 inferred) ...
    "7" + "." * 35,  # ... and a 36-cell line that is none
    "12" + "." * 62,  # a whole 8x8 grid (box 2x4)
]


def entries(source, box=None):
    return [(e.line, e.text, e.error) for e in read_entries(source, box)]


def fast(source, box=None):
    return [
        (line, text, err)
        for b in read_blocks(source, box)
        for line, text, err in zip(b.lines, b.texts, b.errors, strict=True)
    ]


@pytest.mark.parametrize(
    "name",
    [
        "9x9/norvig_top95.txt",
        "9x9/tdoku_test_puzzles.txt",
        "16x16/gecode_janko_16x16.txt",
        "25x25/gecode_frisch_25x25.txt",
        "16x16/original/gecode_janko_16x16.concat.dzn",
    ],
)
def test_the_fast_reader_reads_public_corpora_exactly_like_read_entries(name):
    path = corpus_file(name)
    assert fast(path) == entries(path)


def test_mixed_files_crlf_gzip_and_string_iterables_read_exactly_like_read_entries(tmp_path):
    lines = SAMPLE_LINES[:40] + ODD_LINES + SAMPLE_LINES[40:60]
    plain = tmp_path / "mixed.txt"
    plain.write_text("\n".join(lines))
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(("\r\n".join(SAMPLE_LINES) + "\r\n").encode())
    packed = tmp_path / "mixed.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for source in (plain, crlf, packed, lines):
        assert fast(source) == entries(source)
    assert fast(plain, "3x3") == entries(plain, "3x3")
    assert fast(SAMPLE) == entries(SAMPLE)


def test_a_file_of_rectangular_grids_reads_exactly_like_read_entries_with_the_box_inferred(tmp_path):
    grids = [
        "".join("." if v == 0 else ALPHABET[v - 1] for v in blank(pattern_grid(Box(2, 3)), 0.5, k))
        for k in range(3000)
    ]
    path = tmp_path / "six.txt"
    path.write_text("\n".join(grids) + "\n")
    got = fast(path)
    assert got == entries(path) and len(got) == 3000 and all(err is None for _, _, err in got)


def test_a_byte_order_mark_opening_an_input_is_skipped_not_read_as_a_cell(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + ("\n".join(SAMPLE_LINES[:3]) + "\n").encode())
    packed = tmp_path / "bom.txt.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    strings = ["\ufeff" + SAMPLE_LINES[0], *SAMPLE_LINES[1:3]]
    for source in (path, packed, strings):
        got = fast(source)
        assert got == entries(source) == [(k + 1, SAMPLE_LINES[k], None) for k in range(3)]


def test_a_byte_order_mark_arriving_a_byte_at_a_time_on_a_stream_is_skipped():
    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            if not self.data:
                return 0
            buffer[0], self.data = self.data[0], self.data[1:]
            return 1

    got = fast(io.BufferedReader(Trickle(b"\xef\xbb\xbf" + SAMPLE_LINES[0].encode()), buffer_size=1))
    assert got == [(1, SAMPLE_LINES[0], None)]


def test_an_over_long_line_is_refused_with_its_true_length(tmp_path):
    path = tmp_path / "long.txt"
    path.write_bytes(b"." * 10_485_760 + b"\n" + SAMPLE_LINES[0].encode() + b"\n")
    got = fast(path)
    assert got == entries(path)
    assert got[0][2] == "10,485,760 characters is longer than the 49,152 allowed" and got[1][2] is None
    wide = tmp_path / "wide.txt"  # two bytes a character: the length counts characters
    wide.write_text(SAMPLE_LINES[0] + "\n" + "é" * 2_000_000 + "\n", encoding="utf-8")
    assert fast(wide) == entries(wide) and fast(wide)[1][2].startswith("2,000,000 characters")


class Steps(io.RawIOBase):
    """A raw stream handing out at most `step` bytes a read: the reader's reads cut lines where it says."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data = memoryview(data)
        self.step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001
        n = min(len(buffer), self.step, len(self.data))
        buffer[:n], self.data = self.data[:n], self.data[n:]
        return n


@pytest.mark.parametrize("step", [1 << 20, 98_303, 98_304, 98_305, 262_143, 333_333])
def test_an_over_long_line_gets_read_entries_verdict_and_length_wherever_the_reads_cut_it(tmp_path, step):
    path = tmp_path / "long.txt"
    wide = "é€" * 500_001  # two- and three-byte characters: a read may end inside one
    bad = b"x" * 700_000 + b"\xff" + b"x" * 700_000  # not UTF-8 in the middle: not only its head is checked
    tail = "." * 300_000 + "\r\r"  # a CRLF line's carriage returns are no characters of it
    path.write_bytes(
        b"\n".join([SAMPLE_LINES[0].encode(), wide.encode(), bad, tail.encode(), SAMPLE_LINES[1].encode()])
    )
    want = entries(path)
    assert [e for _, _, e in want] == [
        None,
        too_long(1_000_002),
        "the line is not UTF-8 text",
        too_long(300_000),
        None,
    ]
    assert fast(io.BufferedReader(Steps(path.read_bytes(), step), buffer_size=1 << 20)) == want


def test_a_file_with_cr_only_line_ends_is_one_line_answered_invalid_saying_so_never_skipped(tmp_path):
    for name, text in [
        ("puzzles", "\r".join(SAMPLE_LINES[:3]) + "\r"),
        ("comment-first", "# my puzzles\r" + "\r".join(SAMPLE_LINES[:3])),  # was a comment: dropped unsaid
        ("large", "\r".join(SAMPLE_LINES[:3] * 300)),  # longer than a line may be
    ]:
        path = tmp_path / f"{name}.txt"
        path.write_bytes(text.encode())
        got = fast(path)
        assert got == entries(path), name
        ((line, shown, error),) = got
        assert line == 1 and CR_INSIDE in error and len(shown) <= 200, name
    one = tmp_path / "one.txt"  # a lone puzzle ended by a CR is a puzzle
    one.write_bytes(SAMPLE_LINES[0].encode() + b"\r")
    assert fast(one) == entries(one) == [(1, SAMPLE_LINES[0], None)]


def test_bytes_that_are_not_utf8_become_an_invalid_entry_naming_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(SAMPLE_LINES[0].encode() + b"\n\xff\xfe" + b"." * 79 + b"\n" + SAMPLE_LINES[1].encode())
    got = fast(path)
    assert got == entries(path)
    assert got[1] == (2, "", "the line is not UTF-8 text")


def test_a_truncated_gzip_file_ends_with_an_entry_saying_it_cannot_be_read_further(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(("\n".join(SAMPLE_LINES) + "\n").encode())[:-30])
    got = fast(path)
    assert got[-1][2].startswith("the file cannot be read further")
    assert all(err is None for _, _, err in got[:-1])


line_parts = st.sampled_from(
    [
        SAMPLE_LINES[0],
        SAMPLE_LINES[5],
        "1" * 81,
        "." * 81,
        "..62...8.",
        "5,3,0,0,7,0,0,0,0",
        "# x",
        "",
        "  ",
        "." * 16,
        "1234" + "." * 12,
        "x" * 81,
        "1 2 3 4",
    ]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(line_parts, max_size=40), st.sampled_from(["\n", "\r\n"]))
def test_any_mix_of_lines_is_read_exactly_like_read_entries(tmp_path_factory, lines, newline):
    path = tmp_path_factory.mktemp("mix") / "input.txt"
    path.write_bytes(newline.join(lines).encode())
    assert fast(path) == entries(path)


CSV_FIELDS = st.sampled_from(
    [
        SAMPLE_LINES[0],
        SAMPLE_LINES[5],
        "1" * 81,
        "." * 16,
        "x" * 81,
        "..62...8.",
        "5 3 0 0",
        "é" * 81,
        " " + "." * 81,
    ]
)
CSV_ROWS = st.lists(
    st.one_of(
        st.tuples(CSV_FIELDS, st.sampled_from(["", "s", '"a, quoted ""one"""'])), st.sampled_from(["", "# n"])
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(
    rows=CSV_ROWS,
    column=st.sampled_from([0, 1]),
    newline=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    end=st.booleans(),
)
def test_a_csv_input_whose_first_line_names_its_puzzle_column_reads_as_that_column_line_for_line(
    tmp_path_factory, rows, column, newline, bom, end
):
    """Kaggle's sudoku.csv (`quizzes,solutions`) and the like: the header is skipped as a comment is, each
    other line is its puzzle field; the entries are those of a file of that column, at the file's lines."""
    header = ["quizzes,solutions", "id,Puzzle,solution,"][column]
    csv, plain = [header], [""]
    for row in rows:
        if isinstance(row, str):  # a blank line or a comment: as in any input
            csv.append(row)
            plain.append(row)
            continue
        puzzle, other = row
        csv.append(f"{puzzle},{other}" if column == 0 else f"7,{puzzle},{other}")
        plain.append(puzzle)
    folder = tmp_path_factory.mktemp("csv")
    for name, lines in (("in.csv", csv), ("in.txt", plain)):
        text = ("\ufeff" if bom else "") + newline.join(lines) + (newline if end else "")
        (folder / name).write_bytes(text.encode())
    assert fast(folder / "in.csv") == fast(folder / "in.txt")
    with gzip.open(folder / "in.csv.gz", "wb") as gz:
        gz.write((folder / "in.csv").read_bytes())
    assert fast(folder / "in.csv.gz") == fast(folder / "in.txt")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_large_uniform_csv_is_cut_slab_by_slab_into_the_same_entries_as_its_puzzle_column(
    tmp_path, newline
):
    puzzles = [ln for ln in SAMPLE_LINES if len(ln) == 81] * 40  # ~12,000 lines of 164 bytes: several slabs
    rows = [f"{p},{p.replace('.', '0')}" for p in puzzles]
    (tmp_path / "in.csv").write_bytes(newline.join(["quizzes,solutions", *rows, ""]).encode())
    (tmp_path / "in.txt").write_bytes(newline.join(["", *puzzles, ""]).encode())
    assert fast(tmp_path / "in.csv") == fast(tmp_path / "in.txt")


def test_a_csv_line_without_its_puzzle_field_is_an_invalid_entry_saying_so_never_dropped(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(f"id,puzzle,solution\n1\n2,,x\n3,{SAMPLE_LINES[0]},y\n4")
    assert fast(path) == [
        (2, "1", "the puzzle column (field 2) is missing (the line has 1)"),
        (3, "2,,x", "the puzzle column (field 2) is empty"),
        (4, SAMPLE_LINES[0], None),
        (5, "4", "the puzzle column (field 2) is missing (the line has 1)"),
    ]


def test_a_csv_line_read_as_one_puzzle_says_it_looks_like_csv_and_how_to_read_its_column(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(f"{SAMPLE_LINES[0]},{SAMPLE_LINES[0].replace('.', '0')}\n")  # no header
    ((line, _, error),) = fast(path)
    assert line == 1 and error.startswith("2 cells do not make a square grid") and "--column NAME" in error
    with pytest.raises(ValueError, match=r"in.csv: its first line names no column 'quizzes'"):
        list(read_blocks(str(path), column="quizzes"))


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([(2, 2), (2, 3), (3, 2), (3, 3), (2, 4), (4, 4), (3, 5), (5, 5), (4, 8), (8, 8)]),
    st.integers(0, 2**31),
    st.floats(0.0, 1.0),
)
def test_the_vectorised_clash_check_agrees_with_the_parser_for_every_box_shape(shape, seed, fraction):
    box = Box(*shape)
    rng = np.random.default_rng(seed)
    grids = np.stack([blank(pattern_grid(box), fraction, seed + k) for k in range(8)])
    for k in range(0, 8, 2):  # break half of them with a random value in a random cell
        grids[k, rng.integers(box.cells)] = rng.integers(1, box.n + 1)
    if box.n <= len(ALPHABET):
        texts = ["".join("." if v == 0 else ALPHABET[v - 1] for v in g) for g in grids]
        assert (compact_ok(texts, box) == ~clash_mask(grids.copy(), box)).all()  # every symbol known
        texts[1] = texts[1][:-1] + "#"  # not a symbol
        texts[3] = texts[3][:-1] + ALPHABET[min(box.n, len(ALPHABET) - 1)]  # a symbol too large (if any)
        assert (compact_ok(texts, box) == parse_compact_batch(texts, box)[1]).all()
