"""Real parts together: SQLite and PostgreSQL stores, HTTP servers, the CLI in-process."""
