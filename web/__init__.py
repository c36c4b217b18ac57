"""`sudoku-batch serve`: a Starlette page for one puzzle at a time, the jobs of a broker, and its workers; it
reaches jobs only through the client's public API (`web.solving` alone builds chunk tasks; docs/web.md)."""
