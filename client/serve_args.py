"""The `serve` command's options: part of the command line's grammar, so `sudoku-batch` builds its parser
without loading the web package (`web.server` reads them when `serve` runs)."""

from __future__ import annotations

import argparse

TOKEN_ENV = "SUDOKU_BATCH_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `serve` options."""
    p.add_argument("--broker", default=None, metavar="URL", help="read and submit jobs on this broker")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--token", default=None, help=f"required off loopback (or {TOKEN_ENV}): every request must carry it"
    )
    p.add_argument("--max-time-limit", type=float, default=60.0, metavar="S", help="cap per single puzzle")
    p.add_argument("--max-upload-mb", type=float, default=32.0, metavar="MB", help="largest corpus upload")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="local processes for jobs")
