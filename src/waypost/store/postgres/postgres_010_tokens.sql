-- migration 10: bearer tokens for the HTTP API, and the store-wide change cursor.
--
-- `runs.change_xid` is the transaction that last wrote the run (pg_current_xact_id()).
-- Transaction ids are handed out when a transaction first writes, not when it commits, so a
-- reader takes only the ids below its snapshot's xmin (every transaction below it has
-- ended) and keeps that xmin as its cursor: nothing commits below a cursor after it was
-- read, and no writer waits on a shared counter. No index names the column, so a
-- heartbeat's update stays HOT; a reader scans the runs (the server polls once for all its
-- streams). Runs written before this migration sit at 0. Writers that do not set the column would leave it behind and a board would miss their
-- changes, so the oldest writer taken becomes 10.
--
-- `tokens` holds the API's bearer tokens: only a hash of each secret, never the secret.

ALTER TABLE runs ADD COLUMN change_xid xid8 NOT NULL DEFAULT '0';

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

INSERT INTO meta (name, value) VALUES ('min_writer_version', '10')
    ON CONFLICT (name) DO UPDATE SET value = excluded.value;
