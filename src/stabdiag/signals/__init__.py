"""Signals: a Run's own metric names mapped to canonical signals (the alias table and --map in resolve,
names guessed from their words in guess, units decided once in units; the tables are TOML beside them)."""
