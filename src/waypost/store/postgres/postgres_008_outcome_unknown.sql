-- migration 8: what "once" needs when a final delivery is retargeted. An attempt whose
-- outcome is unknown (a timeout or a dropped connection after the request went out: the
-- receiver may already have it) is recorded on its row, so a retarget can refuse to send
-- it to a second target unless the owner accepts a duplicate; the targets it was moved
-- away from that way are kept beside it. Additive: older writers leave both alone.

ALTER TABLE outbox ADD COLUMN outcome_unknown_at timestamptz;  -- when that attempt started
ALTER TABLE outbox ADD COLUMN maybe_delivered_to text;         -- earlier targets, one a line
