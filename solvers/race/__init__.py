"""The in-process race: portfolios raced in one thread by slices (`portfolio`), the members
with restarts (`members`), what one puzzle raced in several processes trades (`exchange`) and
its cubes (`cubes`).
"""
