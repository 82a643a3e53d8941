-- migration 1: runs, their events, and content-addressed blobs.

CREATE TABLE runs (
    id              text PRIMARY KEY,
    version         integer NOT NULL,
    state           text NOT NULL,
    owner           text NOT NULL,
    head_hash       text NOT NULL,
    idempotency_key text UNIQUE,
    fingerprint     text NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    next_check_at   timestamptz,
    packet          jsonb NOT NULL,
    packet_text     text
);

CREATE INDEX runs_state_updated ON runs (state, updated_at);
CREATE INDEX runs_owner ON runs (owner);
CREATE INDEX runs_next_check ON runs (next_check_at, id) WHERE next_check_at IS NOT NULL;

CREATE FUNCTION runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waypost_runs.' || TG_TABLE_SCHEMA,
                      json_build_object('run', NEW.id, 'version', NEW.version,
                                        'state', NEW.state)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_notify AFTER INSERT OR UPDATE OF version ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_notify();

CREATE TABLE events (
    run_id      text NOT NULL REFERENCES runs (id),
    seq         integer NOT NULL,
    type        text NOT NULL,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    body        jsonb NOT NULL,
    body_text   text,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE blobs (
    sha256  text PRIMARY KEY,
    size    bigint NOT NULL,
    data    bytea NOT NULL
);
