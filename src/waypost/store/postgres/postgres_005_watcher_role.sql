-- migration 5: a watcher's role. One watcher per scope holds the sweeper advisory lock and
-- sweeps (active); the others stay registered as standbys and take over when it goes.

ALTER TABLE watchers ADD COLUMN role text NOT NULL DEFAULT 'active';
