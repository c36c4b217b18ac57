"""`sudoku-batch serve`: a web page for one puzzle at a time, the jobs of a broker, and its workers.

A small Starlette app served by uvicorn: server-rendered pages (Jinja2, escaped by default)
with a little JavaScript from `static/`, and a JSON API with the JSON Lines record fields.
It reaches jobs only through the client's public API (`client.batch`, `client.job`, `client.store`,
`client.redis_store`), and solves single puzzles in local processes (embedded) or through
the broker (`--broker`). `web.solving` is the one module that builds chunk tasks itself.
"""
