-- waypost SQLite schema, migration 1. The packet is the fold of its events; both are
-- written in one transaction by the one write primitive (SqliteStore.commit).

CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    version         INTEGER NOT NULL,       -- number of events; the optimistic-concurrency guard
    state           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    head_hash       TEXT NOT NULL,          -- hash of the last event: what the next one chains to
    idempotency_key TEXT UNIQUE,
    fingerprint     TEXT NOT NULL,          -- of the start parameters, for idempotent start
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    next_check_at   REAL,                   -- unix time the watchdog must look again; NULL: never
    packet          TEXT NOT NULL           -- waypost.packet/v1 JSON
) WITHOUT ROWID;

CREATE INDEX runs_state_updated ON runs (state, updated_at);
CREATE INDEX runs_owner ON runs (owner);
CREATE INDEX runs_next_check ON runs (next_check_at) WHERE next_check_at IS NOT NULL;

CREATE TABLE events (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    type    TEXT NOT NULL,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    body    TEXT NOT NULL,                  -- the whole event as JSON, hash included
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE blobs (
    sha256  TEXT PRIMARY KEY,
    size    INTEGER NOT NULL,
    data    BLOB NOT NULL
) WITHOUT ROWID;
