"""Pure rules and parsers: no store, no process, no network."""
