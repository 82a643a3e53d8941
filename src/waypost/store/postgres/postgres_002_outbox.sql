-- migration 2: the outbox. Rows are queued in the same transaction as the event that
-- caused them; relays claim them with FOR UPDATE SKIP LOCKED, send, and record the receipt.

CREATE TABLE outbox (
    key              text PRIMARY KEY,      -- idempotency key, stable across retries
    run_id           text NOT NULL REFERENCES runs (id),
    purpose          text NOT NULL,         -- final | notice
    topic            text NOT NULL,
    target           text NOT NULL,
    event_seq        integer NOT NULL,
    created_at       timestamptz NOT NULL,
    status           text NOT NULL DEFAULT 'queued',   -- queued | sent | failed
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    lease_owner      text,
    lease_expires_at timestamptz,
    last_error       text,
    sent_at          timestamptz,
    receipt          text
);

-- one final delivery per run, ever
CREATE UNIQUE INDEX outbox_one_final ON outbox (run_id) WHERE purpose = 'final';
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'queued';
