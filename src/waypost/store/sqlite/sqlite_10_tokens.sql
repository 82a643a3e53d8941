-- migration 10: bearer tokens for the HTTP API, and the store-wide change cursor.
--
-- `runs.change_pos` is where a run's latest write falls in commit order: every write sets
-- it one past the highest (writers are serialised by the write lock, so the order of
-- positions is the order of commits). A board keeps the position it has seen and asks for
-- the runs at or past it; a run that changes again moves to the end. Runs written before
-- this migration all sit at 0. Writers that do not know this column would leave it behind
-- and a board would miss their changes, so the oldest writer taken becomes 10.
--
-- `tokens` holds the API's bearer tokens: only a hash of each secret, never the secret.

ALTER TABLE runs ADD COLUMN change_pos INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_change ON runs (change_pos);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,       -- public id, shown by `waypost token ls`
    hash        TEXT NOT NULL UNIQUE,   -- sha256 of the secret
    holder      TEXT NOT NULL,          -- the actor every write made with it is recorded as
    role        TEXT NOT NULL,          -- worker | owner | watcher | viewer
    run_id      TEXT,                   -- the one run it may act on; NULL: every run
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    expires_at  TEXT,
    revoked_at  TEXT
);

INSERT INTO meta (name, value) VALUES ('min_writer_version', '10')
    ON CONFLICT (name) DO UPDATE SET value = excluded.value;
