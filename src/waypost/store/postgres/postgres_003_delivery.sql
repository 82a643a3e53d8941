-- migration 3: what the delivery relay needs. The retry horizon runs from `queued_at`
-- (set again when a failed final delivery is re-queued); relays register with a lease so
-- "delivery queued, no relay running" can be told.

ALTER TABLE outbox ADD COLUMN queued_at timestamptz;
ALTER TABLE outbox ADD COLUMN last_attempt_at timestamptz;
UPDATE outbox SET queued_at = next_attempt_at WHERE queued_at IS NULL;
ALTER TABLE outbox ALTER COLUMN queued_at SET NOT NULL;

CREATE INDEX outbox_run ON outbox (run_id, event_seq);

CREATE TABLE relays (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    started_at  timestamptz NOT NULL,
    last_beat   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL        -- past it without a beat: gone
);
