"""One suite every backend passes: each test runs on SQLite and on PostgreSQL."""
