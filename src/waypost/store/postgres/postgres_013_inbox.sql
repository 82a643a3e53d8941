-- migration 13: the inbox's marks, one row per reader and run.
--
-- An inbox item is an event of a run the reader owns (the events are the ledger already);
-- only how far each reader has been shown each run's events, and how far the reader has
-- acknowledged them, is stored here. No foreign key: a waypost older than this never reads
-- or writes the table (its prune leaves a pruned run's marks behind, which no inbox ever
-- reads again), so the oldest writer taken stays 12.

CREATE TABLE inbox_cursors (
    reader      text NOT NULL,              -- the actor whose inbox this is
    run_id      text NOT NULL,              -- a run the reader owns
    shown_upto  integer NOT NULL DEFAULT 0, -- events up to this seq were shown (session-start)
    acked_upto  integer NOT NULL DEFAULT 0, -- events up to this seq were acknowledged (--ack)
    PRIMARY KEY (reader, run_id)
);

CREATE INDEX inbox_cursors_run ON inbox_cursors (run_id);
