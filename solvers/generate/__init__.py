"""Puzzle generation: random full grids (`fill`), digging to unique or minimal puzzles or
blanking cells (`dig`), rating (`difficulty`), seeded chunked runs (`generator`).
"""
