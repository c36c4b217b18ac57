"""The numba toolkit every kernel shares: how a search ended (`outcome`), bit and random
primitives (`bits`), a clock and stop flags callable inside compiled code (`clock`, `stop`).
"""
