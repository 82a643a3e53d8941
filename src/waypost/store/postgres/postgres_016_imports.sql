-- migration 16: runs imported from a bundle (`waypost import`), read-only here.
--
-- `origin` is where such a run came from (`model.Origin` as JSON); NULL for a run of this
-- store's own. No write, watchdog, relay or prune touches a run that has one. A waypost
-- older than this does not know the column, so the oldest writer taken stays 12.

ALTER TABLE runs ADD COLUMN origin text;
