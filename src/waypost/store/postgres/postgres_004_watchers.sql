-- migration 4: what the watchdog needs. Watchers register with a lease (a run counts as
-- watched only while a live one covers it); blobs remember when they were last stored, so
-- `prune` spares a blob whose artifact event is still being written.

CREATE TABLE watchers (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    interval_s  double precision NOT NULL,
    owner       text,
    started_at  timestamptz NOT NULL,
    last_beat   timestamptz NOT NULL,
    last_sweep  timestamptz,
    expires_at  timestamptz NOT NULL
);

CREATE INDEX watchers_expires ON watchers (expires_at);

ALTER TABLE blobs ADD COLUMN stored_at timestamptz;
