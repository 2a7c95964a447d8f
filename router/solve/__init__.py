"""The route search's exact core: the per-token model, the continuous split, the integer
allocation. Pure: no I/O, no clock."""

__all__: list[str] = []
