-- migration 4: what the watchdog needs. Watchers register with a lease (a run counts as
-- watched only while a live one covers it); blobs remember when they were last stored, so
-- `prune` spares a blob whose artifact event is still being written.

CREATE TABLE watchers (
    id          TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    interval_s  REAL NOT NULL,              -- how often it sweeps
    owner       TEXT,                       -- scope: only this owner's runs; NULL: every run
    started_at  TEXT NOT NULL,
    last_beat   TEXT NOT NULL,
    last_sweep  TEXT,
    expires_at  REAL NOT NULL               -- unix time; past it without a beat: gone
) WITHOUT ROWID;

CREATE INDEX watchers_expires ON watchers (expires_at);

ALTER TABLE blobs ADD COLUMN stored_at REAL;   -- unix time last stored; NULL: before this
