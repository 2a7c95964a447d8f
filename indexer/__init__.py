"""The indexer: follows the chain over the Electrum Cash protocol into SQLite and the router's
live pool snapshot."""
