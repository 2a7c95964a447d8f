"""The indexer's SQLite store: schema migrations (`schema`), connections (`db`) and the writer
client (`writer`), the decoder interface (`decoder`), block apply/undo (`apply`) with its
batching policy (`batching`) and the mempool (`mempool`, `overlay`), and the reads the REST API
needs (`queries`)."""

from indexer.store.apply import AppliedBlock, ChainError, ChainTip, Store
from indexer.store.db import open_reader, open_writer
from indexer.store.schema import CORE_MIGRATIONS, Migration, migrate

__all__ = [
    "CORE_MIGRATIONS",
    "AppliedBlock",
    "ChainError",
    "ChainTip",
    "Migration",
    "Store",
    "migrate",
    "open_reader",
    "open_writer",
]
