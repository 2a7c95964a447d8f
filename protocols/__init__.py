"""DeFi protocols on Bitcoin Cash, as pure functions over `bch` values (no I/O)."""
