-- migration 2: the outbox. Rows are queued in the same transaction as the event that
-- caused them; the relay claims them with a lease, sends, and records the receipt.

CREATE TABLE outbox (
    key              TEXT PRIMARY KEY,      -- idempotency key, stable across retries
    run_id           TEXT NOT NULL,
    purpose          TEXT NOT NULL,         -- final | notice
    topic            TEXT NOT NULL,
    target           TEXT NOT NULL,
    event_seq        INTEGER NOT NULL,
    created_at       TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'queued',   -- queued | sent | failed
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL NOT NULL,          -- unix time
    lease_owner      TEXT,
    lease_expires_at REAL,
    last_error       TEXT,
    sent_at          TEXT,
    receipt          TEXT
) WITHOUT ROWID;

-- one final delivery per run, ever
CREATE UNIQUE INDEX outbox_one_final ON outbox (run_id) WHERE purpose = 'final';
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'queued';
