-- migration 6: a cheaper heartbeat. `runs` becomes a rowid table: a 2 KB packet fits in its
-- leaf page there (a WITHOUT ROWID row spills past ~1 KB into an overflow page, one more
-- page per commit). next_check_at is from now on a lower bound, lowered by a commit but
-- raised only by the watchdog, so a heartbeat leaves its index alone (`check_moves`).

CREATE TABLE runs_6 (
    id              TEXT PRIMARY KEY,
    version         INTEGER NOT NULL,       -- number of events; the optimistic-concurrency guard
    state           TEXT NOT NULL,
    owner           TEXT NOT NULL,
    head_hash       TEXT NOT NULL,          -- hash of the last event: what the next one chains to
    idempotency_key TEXT UNIQUE,
    fingerprint     TEXT NOT NULL,          -- of the start parameters, for idempotent start
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    next_check_at   REAL,                   -- unix time the watchdog must look by; NULL: never
    packet          TEXT NOT NULL           -- waypost.packet/v1 JSON
);

INSERT INTO runs_6 (id, version, state, owner, head_hash, idempotency_key, fingerprint,
                    created_at, updated_at, next_check_at, packet)
    SELECT id, version, state, owner, head_hash, idempotency_key, fingerprint, created_at,
           updated_at, next_check_at, packet FROM runs ORDER BY id;

DROP TABLE runs;
ALTER TABLE runs_6 RENAME TO runs;

CREATE INDEX runs_state_updated ON runs (state, updated_at);
CREATE INDEX runs_owner ON runs (owner);
CREATE INDEX runs_next_check ON runs (next_check_at, id) WHERE next_check_at IS NOT NULL;
