"""A local Bitcoin Cash network speaking the Electrum Cash protocol."""
