"""The puzzle model: boxes and puzzles, parsing and reading, unit tables, the independent
verifier and the cost, and what a solve returns (`result`: `Status`, `SolveResult`, `Results`).
"""
