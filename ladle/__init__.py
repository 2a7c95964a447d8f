"""ladle: indexer, data API, swap router and broadcaster for the Cauldron DEX on Bitcoin Cash."""

__version__ = "0.1.0"
__all__ = ["__version__"]
