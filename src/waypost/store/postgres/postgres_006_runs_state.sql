-- migration 6: a cheaper heartbeat. The board's index keys on state alone (`ls` sorts the
-- matching rows by updated_at itself), and next_check_at is from now on a lower bound that a
-- heartbeat leaves alone: a heartbeat changes no indexed column, so its update stays HOT
-- and writes no index entry.

DROP INDEX runs_state_updated;
CREATE INDEX runs_state ON runs (state);
