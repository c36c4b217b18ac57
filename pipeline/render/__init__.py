"""Records from a chunk's `ResultColumns`: JSON Lines (`jsonl`, compiled), CSV (`csv_text`), Parquet
(`parquet`, with the optional pyarrow), and Python objects (`record.Record`).

Every renderer writes the public record fields (`pipeline.columns.FIELDS`) from the same
columns; a result that came as rendered records (`v` 1: an older worker, or a result read
once already) is read through its JSON lines instead.
"""
