-- migration 3: what the delivery relay needs. The retry horizon runs from `queued_at`
-- (set again when a failed final delivery is re-queued); relays register with a lease so
-- "delivery queued, no relay running" can be told.

ALTER TABLE outbox ADD COLUMN queued_at REAL;          -- unix time it was (last) queued
ALTER TABLE outbox ADD COLUMN last_attempt_at REAL;    -- unix time of the latest claim
UPDATE outbox SET queued_at = next_attempt_at WHERE queued_at IS NULL;

CREATE INDEX outbox_run ON outbox (run_id, event_seq);

CREATE TABLE relays (
    id          TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    last_beat   TEXT NOT NULL,
    expires_at  REAL NOT NULL               -- unix time; past it without a beat: gone
) WITHOUT ROWID;
