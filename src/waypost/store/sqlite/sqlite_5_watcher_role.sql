-- migration 5: a watcher's role. Where several hosts share a store, one watcher per scope
-- holds the sweeper lock and sweeps (active); the others stay registered as standbys.

ALTER TABLE watchers ADD COLUMN role TEXT NOT NULL DEFAULT 'active';   -- active | standby
