-- waypost PostgreSQL schema, complete and current: a fresh store runs this file once and
-- records every migration as applied. An existing store runs the postgres_NNN_*.sql files
-- it has not seen yet instead; a test keeps the two paths equal.
--
-- The packet is the fold of its events; both are written in one transaction by the one
-- write primitive (PostgresStore.commit), guarded by the packet version.

CREATE TABLE runs (
    id              text PRIMARY KEY,
    version         integer NOT NULL,       -- number of events; the optimistic-concurrency guard
    state           text NOT NULL,
    owner           text NOT NULL,
    head_hash       text NOT NULL,          -- hash of the last event: what the next one chains to
    idempotency_key text UNIQUE,
    fingerprint     text NOT NULL,          -- of the start parameters, for idempotent start
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    next_check_at   timestamptz,            -- when the watchdog must look by; NULL: never
    packet          jsonb NOT NULL,         -- waypost.packet/v1
    packet_text     text,                   -- the exact JSON, only when jsonb cannot hold it
    session_id      text,                   -- the agent host's session (`start --session`)
    stop_blocks     integer NOT NULL DEFAULT 0, -- the stop hook's consecutive refusals
    change_xid      xid8 NOT NULL DEFAULT '0',  -- the transaction that last wrote it: the
                                                -- change cursor (no index: updates stay HOT)
    origin          text                    -- an imported run's origin (JSON); NULL: local
);

-- no index names a column a heartbeat changes (updated_at, and next_check_at as long as
-- it stays ahead): a heartbeat's update is HOT and writes no index entry
CREATE INDEX runs_state ON runs (state);
CREATE INDEX runs_owner ON runs (owner);
CREATE INDEX runs_next_check ON runs (next_check_at, id) WHERE next_check_at IS NOT NULL;
CREATE INDEX runs_session ON runs (session_id) WHERE session_id IS NOT NULL;

-- A run starting, and a run moving to another state, is announced on the channel
-- `waypost_runs.<schema>` (payload: {"run", "version", "state"}); listeners hear it only
-- once the write commits. Other writes (a heartbeat) announce nothing: a notification takes
-- a server-wide lock through the commit's flush, and the board follows the change cursor.
CREATE FUNCTION runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waypost_runs.' || TG_TABLE_SCHEMA,
                      json_build_object('run', NEW.id, 'version', NEW.version,
                                        'state', NEW.state)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_notify AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_notify();

CREATE TRIGGER runs_notify_state AFTER UPDATE OF state ON runs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION runs_notify();

CREATE TABLE events (
    run_id      text NOT NULL REFERENCES runs (id),
    seq         integer NOT NULL,
    type        text NOT NULL,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    body        jsonb NOT NULL,             -- the whole event, hash included
    body_text   text,                       -- the exact JSON, only when jsonb cannot hold it
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE blobs (
    sha256      text PRIMARY KEY,
    size        bigint NOT NULL,
    data        bytea NOT NULL,
    stored_at   timestamptz                 -- last stored (prune spares recent ones); NULL: long ago
);

-- Rows are queued in the same transaction as the event that caused them; relays claim
-- them with FOR UPDATE SKIP LOCKED, send, and record the receipt.
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
    receipt          text,
    queued_at        timestamptz NOT NULL,  -- when it was (last) queued: the retry horizon
    last_attempt_at  timestamptz,           -- the latest claim
    outcome_unknown_at timestamptz,         -- an attempt whose outcome is unknown started
    maybe_delivered_to text                 -- targets it left with an unknown outcome, one a line
);

-- one final delivery per run, ever
CREATE UNIQUE INDEX outbox_one_final ON outbox (run_id) WHERE purpose = 'final';
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'queued';
CREATE INDEX outbox_run ON outbox (run_id, event_seq);

-- Delivery relays register with a lease, so "queued, but no relay running" can be told.
CREATE TABLE relays (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    started_at  timestamptz NOT NULL,
    last_beat   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL        -- past it without a beat: gone
);

-- Watchers register with a lease: a run counts as watched only while a live one covers it.
CREATE TABLE watchers (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    interval_s  double precision NOT NULL,  -- how often it sweeps
    owner       text,                       -- scope: only this owner's runs; NULL: every run
    started_at  timestamptz NOT NULL,
    last_beat   timestamptz NOT NULL,
    last_sweep  timestamptz,
    expires_at  timestamptz NOT NULL,       -- past it without a beat: gone
    role        text NOT NULL DEFAULT 'active'  -- active: holds the sweeper lock; standby
);

CREATE INDEX watchers_expires ON watchers (expires_at);

-- Store-level settings an operator sets, the same for every host (never read on the
-- heartbeat's path).
CREATE TABLE settings (
    name    text PRIMARY KEY,
    value   text NOT NULL
);

-- The schema's own record: `min_writer_version` is the oldest schema version whose waypost
-- may still write to this store (an older one only reads it).
CREATE TABLE meta (
    name    text PRIMARY KEY,
    value   text NOT NULL
);

INSERT INTO meta (name, value) VALUES ('min_writer_version', '12');

-- The HTTP API's bearer tokens: only a hash of each secret, never the secret.
CREATE TABLE tokens (
    id          text PRIMARY KEY,
    hash        text NOT NULL UNIQUE,
    holder      text NOT NULL,
    role        text NOT NULL,
    run_id      text,
    created_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    expires_at  timestamptz,
    revoked_at  timestamptz
);

-- The inbox's marks, one row per reader and run: how far the reader has been shown each
-- run's events (session-start) and how far it has acknowledged them (`inbox --ack`). The
-- items themselves are the events of the runs the reader owns. No foreign key: an older
-- writer's prune does not know this table.
CREATE TABLE inbox_cursors (
    reader      text NOT NULL,
    run_id      text NOT NULL,
    shown_upto  integer NOT NULL DEFAULT 0,
    acked_upto  integer NOT NULL DEFAULT 0,
    PRIMARY KEY (reader, run_id)
);

CREATE INDEX inbox_cursors_run ON inbox_cursors (run_id);

-- The answers queue: answers from Slack and GitHub, stored under the service's request key
-- once decided, carried out after by whichever server claims them (`store/answers.py`).
CREATE TABLE answers (
    key          text PRIMARY KEY,
    source       text NOT NULL,
    run_id       text NOT NULL,
    body         text NOT NULL,
    received_at  timestamptz NOT NULL,
    done         boolean NOT NULL DEFAULT false,
    claimed_by   text,
    claim_until  double precision,
    attempts     integer NOT NULL DEFAULT 0,
    outcome      text,
    done_at      timestamptz
);

CREATE INDEX answers_open ON answers (done, received_at);

-- The public signing keys (`store/keys.py`): what signs a run's bundle. Only the public
-- half; a key is retired, never deleted.
CREATE TABLE signing_keys (
    keyid       text PRIMARY KEY,
    holder      text NOT NULL,
    public_key  text NOT NULL,
    valid_from  timestamptz NOT NULL,
    retired_at  timestamptz
);
