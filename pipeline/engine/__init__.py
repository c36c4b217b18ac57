"""How a task runs where it runs: the chunk runner, solving into parts, rendering, the puzzle reader, input
splits, storage and datasets."""
