-- migration 9: the agent-host session a run belongs to, and the stop hook's own count.
-- `waypost start --session ID` records the host's session id (Claude Code's `session_id`)
-- here, not in the `Started` event: the session is how a host finds the run, not part of
-- the run's history, and the hash-chained events keep their shape. `stop_blocks` counts
-- the stop hook's consecutive refusals of this run's session, so a cap can let it go.
-- Additive: older writers leave both alone.

ALTER TABLE runs ADD COLUMN session_id text;
ALTER TABLE runs ADD COLUMN stop_blocks integer NOT NULL DEFAULT 0;
CREATE INDEX runs_session ON runs (session_id) WHERE session_id IS NOT NULL;
