"""One hard puzzle across the fleet (`--escalate-after`): the owner calls idle processes as helpers through
a board; the helper task, its entries and the record folded from them."""
