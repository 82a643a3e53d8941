-- migration 7: store-level settings, and what a writer must know. `settings` holds values
-- an operator sets for the whole store (the same for every process using it), read when a
-- rule needs them, never on the heartbeat's path. `meta` is the schema's own record:
-- `min_writer_version` is the oldest schema version whose waypost may still write here.
-- A migration that older writers would damage raises it; an additive one leaves it, so a
-- store migrated ahead of a fleet's upgrade keeps taking the older hosts' writes.

CREATE TABLE settings (
    name    TEXT PRIMARY KEY,
    value   TEXT NOT NULL
);

CREATE TABLE meta (
    name    TEXT PRIMARY KEY,
    value   TEXT NOT NULL
);

INSERT INTO meta (name, value) VALUES ('min_writer_version', '7')
    ON CONFLICT (name) DO UPDATE SET value = excluded.value;
